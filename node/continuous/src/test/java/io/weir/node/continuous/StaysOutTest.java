package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * {@link ScopedDelta#staysOut}: a transaction decided without a read must leave the result exactly
 * as the query over the changed base would return it. A model: a base of rows (id, score, and
 * whether the scope sees the row, standing for RLS and the query's filters, which the change's
 * tuple does not show), random transactions of inserts, updates and deletes; whenever the rule says
 * "stays out", the top N of the new base equals the current result.
 */
class StaysOutTest {
  private static final JsonNodeFactory F = JsonNodeFactory.instance;
  private static final TableSchema T =
      new TableSchema(
          16_400,
          "public",
          "t",
          ReplicaIdentity.DEFAULT,
          List.of(
              new TableSchema.Column("id", 23, -1, true),
              new TableSchema.Column("score", 23, -1, false)));

  private record Row(Integer score, boolean visible) {}

  private static Definition definition(int limit, boolean descending, List<String> orderSources) {
    return new Definition(
        "SELECT id, score FROM t",
        F.objectNode(),
        List.of("id"),
        List.of(new Definition.OrderColumn("score", descending)),
        limit,
        List.of("id", "score"),
        List.of("public.t"),
        List.of("int4", "int4"),
        new Definition.Impact(
            "public.t", List.of("id"), List.of("integer"), List.of(), orderSources),
        null);
  }

  private static List<ResultRow> topN(Map<Integer, Row> base, int n, ResultOrder order) {
    List<ResultRow> all = new ArrayList<>();
    base.forEach(
        (id, r) -> {
          if (r.visible()) {
            all.add(ScopedDeltaTest.row(id, r.score()));
          }
        });
    all.sort(order);
    return List.copyOf(all.subList(0, Math.min(n, all.size())));
  }

  private static String text(Integer v) {
    return v == null ? null : v.toString();
  }

  @Test
  void aTransactionDecidedWithoutAReadLeavesTheResultAsTheQueryWouldReturnIt() {
    long seed = System.nanoTime();
    Random random = new Random(seed);
    int decided = 0;
    for (int round = 0; round < 20_000; round++) {
      int limit = 1 + random.nextInt(6);
      Definition d = definition(limit, random.nextBoolean(), List.of("score"));
      ResultOrder order = ResultOrder.of(d);
      Map<Integer, Row> base = new HashMap<>();
      int size = random.nextInt(25);
      for (int i = 0; i < size; i++) {
        base.put(
            random.nextInt(50),
            new Row(random.nextInt(15) == 0 ? null : random.nextInt(40), random.nextInt(4) > 0));
      }
      List<ResultRow> current = topN(base, limit, order);
      ScopedDelta.Keys keys = new ScopedDelta.Keys(d.impact(), Set.of("public.t"), 100);
      int changes = 1 + random.nextInt(3);
      for (int c = 0; c < changes; c++) {
        int id = random.nextInt(50);
        Integer score = random.nextInt(15) == 0 ? null : random.nextInt(40);
        boolean visible = random.nextInt(4) > 0;
        int kind = random.nextInt(3);
        if (kind == 2 && base.containsKey(id)) {
          base.remove(id);
          keys.change(new Change.Delete(T, OldTupleKind.KEY, TupleData.ofText("" + id, null)), T);
        } else if (base.containsKey(id)) {
          base.put(id, new Row(score, visible));
          keys.change(
              new Change.Update(T, OldTupleKind.NONE, null, TupleData.ofText("" + id, text(score))),
              T);
        } else {
          base.put(id, new Row(score, visible));
          keys.change(new Change.Insert(T, TupleData.ofText("" + id, text(score))), T);
        }
      }
      if (ScopedDelta.staysOut(current, limit, d, keys, order)) {
        decided++;
        assertThat(topN(base, limit, order)).as("seed %d round %d", seed, round).isEqualTo(current);
      }
    }
    assertThat(decided)
        .as("transactions decided without a read (seed %d)", seed)
        .isGreaterThan(500);
  }

  @Test
  void undecidedWithoutOrderSourcesOnATieOrForAnAffectedResultRow() {
    Definition d = definition(2, true, List.of("score"));
    ResultOrder order = ResultOrder.of(d);
    List<ResultRow> current = List.of(ScopedDeltaTest.row(1, 30), ScopedDeltaTest.row(2, 20));
    // Ranks after the last row (20, descending): stays out.
    assertThat(staysOut(d, order, current, new Change.Insert(T, TupleData.ofText("3", "19"))))
        .isTrue();
    // Ties with it: id order would decide; the rule leaves that to a read.
    assertThat(staysOut(d, order, current, new Change.Insert(T, TupleData.ofText("3", "20"))))
        .isFalse();
    // Ranks before it.
    assertThat(staysOut(d, order, current, new Change.Insert(T, TupleData.ofText("3", "25"))))
        .isFalse();
    // A result row changed, even to a lower score.
    assertThat(
            staysOut(
                d,
                order,
                current,
                new Change.Update(T, OldTupleKind.NONE, null, TupleData.ofText("2", "1"))))
        .isFalse();
    // A deleted result row.
    assertThat(
            staysOut(
                d,
                order,
                current,
                new Change.Delete(T, OldTupleKind.KEY, TupleData.ofText("1", null))))
        .isFalse();
    // A null score sorts first descending.
    assertThat(staysOut(d, order, current, new Change.Insert(T, TupleData.ofText("3", null))))
        .isFalse();
    // Without the order's sources (an expression, a view, an older registration): no decision.
    Definition noSources = definition(2, true, null);
    assertThat(
            staysOut(noSources, order, current, new Change.Insert(T, TupleData.ofText("3", "19"))))
        .isFalse();
    // A result with fewer rows than the limit takes any visible row.
    assertThat(
            staysOut(
                d,
                order,
                List.of(ScopedDeltaTest.row(1, 30)),
                new Change.Insert(T, TupleData.ofText("3", "1"))))
        .isFalse();
  }

  @Test
  void aTransactionOfDeletesAloneIsUndecidedWithoutOrderSources() {
    // ORDER BY an aggregate (no origin): deleting rows of a group outside the result changes that
    // group's count, which may now lead.
    Definition d = definition(1, false, null);
    ResultOrder order = ResultOrder.of(d);
    assertThat(
            staysOut(
                d,
                order,
                List.of(ScopedDeltaTest.row(1, 2)),
                new Change.Delete(T, OldTupleKind.KEY, TupleData.ofText("2", null))))
        .isFalse();
  }

  @Test
  void aResultWithANullKeyIsUndecided() {
    Definition d = definition(2, true, List.of("score"));
    ResultOrder order = ResultOrder.of(d);
    ObjectNode total = F.objectNode().putNull("id").put("score", 50);
    ArrayNode nullKey = F.arrayNode().addNull();
    List<ResultRow> current =
        List.of(new ResultRow(nullKey.toString(), nullKey, total), ScopedDeltaTest.row(1, 30));
    assertThat(staysOut(d, order, current, new Change.Insert(T, TupleData.ofText("3", "1"))))
        .isFalse();
  }

  @Test
  void orderSourcesAreRecordedOnlyForPlainColumnsOfAnUngroupedPlan() {
    Definition.Impact impact = new Definition.Impact("public.t", List.of("id"), List.of("integer"));
    List<Definition.OrderColumn> order = List.of(new Definition.OrderColumn("o", false));
    List<String> columns = List.of("id", "o");
    List<String[]> origins =
        Arrays.asList(new String[] {"public", "t", "id"}, new String[] {"public", "t", "score"});
    assertThat(
            ImpactPlan.withOrderSources(impact, order, columns, origins, Set.of("Seq Scan"))
                .orderSources())
        .containsExactly("score");
    // Grouped: a row's values come from its whole group (HAVING may admit it on another row).
    assertThat(
            ImpactPlan.withOrderSources(
                    impact, order, columns, origins, Set.of("Seq Scan", "Aggregate"))
                .orderSources())
        .isNull();
    // An expression, or a column of another table.
    List<String[]> expression = Arrays.asList(new String[] {"public", "t", "id"}, null);
    assertThat(
            ImpactPlan.withOrderSources(impact, order, columns, expression, Set.of("Seq Scan"))
                .orderSources())
        .isNull();
    List<String[]> joined =
        Arrays.asList(new String[] {"public", "t", "id"}, new String[] {"public", "u", "score"});
    assertThat(
            ImpactPlan.withOrderSources(impact, order, columns, joined, Set.of("Seq Scan"))
                .orderSources())
        .isNull();
  }

  @Test
  void groupingSetsAreNotAPlanNodeTheScopedDeltaAccepts() throws Exception {
    JsonNode plan =
        new ObjectMapper()
            .readTree(
                "{\"Node Type\": \"Aggregate\", \"Grouping Sets\": [{\"Group Keys\": [\"k\"]}],"
                    + " \"Plans\": [{\"Node Type\": \"Seq Scan\", \"Relation Name\": \"t\","
                    + " \"Schema\": \"public\"}]}");
    Map<String, Integer> scans = new HashMap<>();
    Set<String> types = new TreeSet<>();
    ImpactPlan.scans(plan, scans, types);
    assertThat(types).contains("Grouping Sets");
    assertThat(ImpactPlan.DELTA_NODES.containsAll(types)).isFalse();
  }

  private static boolean staysOut(
      Definition d, ResultOrder order, List<ResultRow> current, Change change) {
    ScopedDelta.Keys keys = new ScopedDelta.Keys(d.impact(), Set.of("public.t"), 100);
    keys.change(change, T);
    return ScopedDelta.staysOut(current, d.limit(), d, keys, order);
  }
}
