package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The scoped delta's merge rule against brute force: for random bases, results and transactions, a
 * merge that does not fall back must give exactly the new base's top-N; and it must not fall back
 * so often that it is useless.
 */
class ScopedDeltaTest {
  private static final JsonNodeFactory F = JsonNodeFactory.instance;

  private static Definition definition(int limit, boolean descending) {
    return new Definition(
        "SELECT id, score FROM t",
        F.objectNode(),
        List.of("id"),
        List.of(new Definition.OrderColumn("score", descending)),
        limit,
        List.of("id", "score"),
        List.of("public.t"),
        List.of("int4", "int4"),
        new Definition.Impact("public.t", List.of("id"), List.of("integer")),
        null);
  }

  /** A result row {id, score} keyed by id (also used by {@link StaysOutTest}). */
  static ResultRow row(int id, Integer score) {
    ObjectNode r = F.objectNode().put("id", id);
    if (score == null) {
      r.putNull("score");
    } else {
      r.put("score", score);
    }
    ArrayNode key = F.arrayNode().add(id);
    return new ResultRow(key.toString(), key, r);
  }

  private static List<ResultRow> topN(Map<Integer, Integer> base, int n, ResultOrder order) {
    List<ResultRow> all = new ArrayList<>();
    base.forEach((id, score) -> all.add(row(id, score)));
    all.sort(order);
    return List.copyOf(all.subList(0, Math.min(n, all.size())));
  }

  @Test
  void mergeEqualsTheFullQueryWheneverItDoesNotFallBack() {
    long seed = System.nanoTime();
    Random random = new Random(seed);
    int merged = 0;
    int fallbacks = 0;
    Map<String, Integer> reasons = new TreeMap<>();
    for (int round = 0; round < 20_000; round++) {
      int limit = 1 + random.nextInt(8);
      boolean desc = random.nextBoolean();
      Definition d = definition(limit, desc);
      ResultOrder order = ResultOrder.of(d);
      Map<Integer, Integer> base = new HashMap<>();
      int size = random.nextInt(20);
      for (int i = 0; i < size; i++) {
        base.put(random.nextInt(40), random.nextInt(10) == 0 ? null : random.nextInt(30));
      }
      List<ResultRow> current = topN(base, limit, order);
      // A transaction: a few inserts, updates and deletes.
      Set<Integer> touched = new HashSet<>();
      int changes = 1 + random.nextInt(3);
      for (int i = 0; i < changes; i++) {
        int id = random.nextInt(40);
        touched.add(id);
        if (random.nextInt(4) == 0) {
          base.remove(id);
        } else {
          base.put(id, random.nextInt(10) == 0 ? null : random.nextInt(30));
        }
      }
      Set<String> affected = new HashSet<>();
      List<ResultRow> fetched = new ArrayList<>();
      for (int id : touched) {
        affected.add(F.arrayNode().add(id).toString());
        if (base.containsKey(id)) {
          fetched.add(row(id, base.get(id)));
        }
      }
      ScopedDelta.Outcome outcome = ScopedDelta.merge(current, affected, fetched, limit, order);
      if (outcome.fallback() != null) {
        fallbacks++;
        reasons.merge(outcome.fallback().wireName(), 1, Integer::sum);
        continue;
      }
      merged++;
      assertThat(outcome.result())
          .as("seed %d round %d", seed, round)
          .isEqualTo(topN(base, limit, order));
    }
    System.out.println(
        "scoped-delta merge: seed="
            + seed
            + " merged="
            + merged
            + " fallbacks="
            + fallbacks
            + " "
            + reasons);
    assertThat(merged)
        .as("most random transactions are decided without a full read")
        .isGreaterThan(fallbacks);
    assertThat(reasons.keySet()).containsOnly("visible-row-left", "rank-boundary");
  }

  @Test
  void rowsOutsideTheAffectedKeysOrWithNullKeysFallBack() {
    Definition d = definition(2, true);
    ResultOrder order = ResultOrder.of(d);
    List<ResultRow> current = List.of(row(1, 10), row(2, 5));
    assertThat(ScopedDelta.merge(current, Set.of("[3]"), List.of(row(4, 20)), 2, order).fallback())
        .isEqualTo(FallbackReason.DELTA_OUTSIDE_AFFECTED);
    assertThat(
            ScopedDelta.merge(current, Set.of("[3]"), List.of(row(3, 20), row(3, 21)), 2, order)
                .fallback())
        .isEqualTo(FallbackReason.DUPLICATE_KEY);
    ArrayNode nullKey = F.arrayNode().addNull();
    ResultRow nul =
        new ResultRow(nullKey.toString(), nullKey, F.objectNode().putNull("id").put("score", 1));
    assertThat(
            ScopedDelta.merge(List.of(row(1, 10), nul), Set.of("[3]"), List.of(), 2, order)
                .fallback())
        .isEqualTo(FallbackReason.NULL_KEY);
    // A new leader displaces the tail; an in-place change; the tail worsening with no entrant.
    assertThat(ScopedDelta.merge(current, Set.of("[3]"), List.of(row(3, 7)), 2, order).result())
        .extracting(ResultRow::keyText)
        .containsExactly("[1]", "[3]");
    assertThat(ScopedDelta.merge(current, Set.of("[2]"), List.of(row(2, 1)), 2, order).fallback())
        .isEqualTo(FallbackReason.RANK_BOUNDARY);
    assertThat(ScopedDelta.merge(current, Set.of("[1]"), List.of(), 2, order).fallback())
        .isEqualTo(FallbackReason.VISIBLE_ROW_LEFT);
    // Fewer rows than the limit: the result was the whole base, any change is decided.
    assertThat(ScopedDelta.merge(List.of(row(1, 10)), Set.of("[1]"), List.of(), 2, order).result())
        .isEmpty();
  }

  @Test
  void orderFollowsPostgresqlForNumbersNullsAndTime() {
    Definition d =
        new Definition(
            "SELECT",
            F.objectNode(),
            List.of("k"),
            List.of(new Definition.OrderColumn("v", false)),
            5,
            List.of("k", "v"),
            List.of("public.t"),
            List.of("uuid", "float8"),
            null,
            null);
    ResultOrder order = ResultOrder.of(d);
    ObjectNode nan =
        F.objectNode().put("k", "00000000-0000-0000-0000-000000000001").put("v", "NaN");
    ObjectNode inf =
        F.objectNode().put("k", "00000000-0000-0000-0000-000000000002").put("v", "Infinity");
    ObjectNode negZero =
        F.objectNode().put("k", "00000000-0000-0000-0000-00000000000a").put("v", -0.0);
    ObjectNode zero = F.objectNode().put("k", "00000000-0000-0000-0000-00000000000b").put("v", 0.0);
    ObjectNode nul = F.objectNode().put("k", "00000000-0000-0000-0000-000000000003").putNull("v");
    List<ResultRow> rows = new ArrayList<>();
    for (ObjectNode o : List.of(nul, nan, inf, zero, negZero)) {
      ArrayNode key = F.arrayNode().add(o.get("k"));
      rows.add(new ResultRow(key.toString(), key, o));
    }
    rows.sort(order);
    assertThat(rows)
        .extracting(r -> r.row().get("k").asText())
        .as("-0 = 0 (tie broken by key), Infinity, NaN, then NULL")
        .containsExactly(
            "00000000-0000-0000-0000-00000000000a",
            "00000000-0000-0000-0000-00000000000b",
            "00000000-0000-0000-0000-000000000002",
            "00000000-0000-0000-0000-000000000001",
            "00000000-0000-0000-0000-000000000003");

    Definition t =
        new Definition(
            "SELECT",
            F.objectNode(),
            List.of("k"),
            List.of(new Definition.OrderColumn("at", true)),
            5,
            List.of("k", "at"),
            List.of("public.t"),
            List.of("int4", "timestamptz"),
            null,
            null);
    ResultOrder byTime = ResultOrder.of(t);
    ResultRow a =
        new ResultRow(
            "[1]",
            F.arrayNode().add(1),
            F.objectNode().put("k", 1).put("at", "2026-03-29 01:30:00+00"));
    ResultRow b =
        new ResultRow(
            "[2]",
            F.arrayNode().add(2),
            F.objectNode().put("k", 2).put("at", "2026-03-29 03:00:00+02"));
    assertThat(byTime.compare(a, b))
        .as("01:30Z is later than 03:00+02 (01:00Z): first when descending")
        .isNegative();
    ResultRow bc =
        new ResultRow(
            "[3]",
            F.arrayNode().add(3),
            F.objectNode().put("k", 3).put("at", "0044-03-15 00:00:00+00 BC"));
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> byTime.compare(a, bc))
        .isInstanceOf(ResultOrder.Incomparable.class);

    Definition text =
        new Definition(
            "SELECT",
            F.objectNode(),
            List.of("k"),
            List.of(new Definition.OrderColumn("name", false)),
            5,
            List.of("k", "name"),
            List.of("public.t"),
            List.of("int4", "text"),
            null,
            null);
    assertThat(ResultOrder.of(text))
        .as("text order depends on the collation: no Java order")
        .isNull();
    Definition textKey =
        new Definition(
            "SELECT",
            F.objectNode(),
            List.of("slug"),
            List.of(new Definition.OrderColumn("w", true)),
            5,
            List.of("slug", "w"),
            List.of("public.t"),
            List.of("text", "int4"),
            null,
            null);
    ResultOrder bySlug = ResultOrder.of(textKey);
    ResultRow x =
        new ResultRow(
            "[\"a\"]", F.arrayNode().add("a"), F.objectNode().put("slug", "a").put("w", 1));
    ResultRow y =
        new ResultRow(
            "[\"B\"]", F.arrayNode().add("B"), F.objectNode().put("slug", "B").put("w", 2));
    ResultRow z =
        new ResultRow(
            "[\"c\"]", F.arrayNode().add("c"), F.objectNode().put("slug", "c").put("w", 1));
    assertThat(bySlug.compare(y, x)).as("the order column decides").isNegative();
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> bySlug.compare(x, z))
        .as("a tie reaches the text key")
        .isInstanceOf(ResultOrder.Incomparable.class);
  }

  @Test
  void integerKeysAreSpelledAsTheResultSpellsThem() {
    Definition.Impact ints =
        new Definition.Impact("public.t", List.of("a", "b"), List.of("integer", "bigint"));
    assertThat(ScopedDelta.integerKeys(ints, List.of(List.of("5", "-9000000000"))))
        .containsExactly("[5,-9000000000]");
    assertThat(ScopedDelta.integerKeys(ints, List.of(List.of("5", "x")))).isNull();
    Definition.Impact text = new Definition.Impact("public.t", List.of("a"), List.of("text"));
    assertThat(ScopedDelta.integerKeys(text, List.of(List.of("5"))))
        .as("other types are cast by PostgreSQL")
        .isNull();
  }
}
