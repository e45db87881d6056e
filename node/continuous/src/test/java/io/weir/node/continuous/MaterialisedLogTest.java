package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.sharding.continuous.ContinuousSession;
import io.weir.sharding.continuous.MaterialisedResult;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The session entity keeps the materialised result by applying the replay log's events ({@link
 * MaterialisedResult}); here the events are the ones a {@link Session} really proposes, and after
 * every proposal the entity's result must be the session's, key and values byte for byte.
 */
class MaterialisedLogTest {

  private static Session session() {
    return TestSessions.session(
        "cq_1",
        "scope",
        TestSessions.definition(
            "score",
            8,
            List.of("id", "score", "note"),
            null,
            List.of("int4", "numeric", "text"),
            null),
        10_000);
  }

  private static ResultRow row(Random random, int id) {
    ArrayNode key = JsonNodeFactory.instance.arrayNode().add(id);
    ObjectNode row =
        JsonNodeFactory.instance
            .objectNode()
            .put("id", id)
            .put("score", new BigDecimal(random.nextInt(3) + ".50"));
    String[] notes = {
      "plain",
      "quote \" and \\ backslash",
      "unicode \u00e9\u4e2d\ud83d\ude00",
      "{\"not\":\"json\"}",
      "\u0001ctl"
    };
    if (random.nextBoolean()) {
      row.put("note", notes[random.nextInt(notes.length)]);
    } else {
      row.putNull("note");
    }
    return new ResultRow(key.toString(), key, row);
  }

  private static List<ResultRow> randomResult(Random random) {
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      ids.add(i);
    }
    java.util.Collections.shuffle(ids, random);
    List<ResultRow> out = new ArrayList<>();
    int n = random.nextInt(9);
    for (int i = 0; i < n; i++) {
      out.add(row(random, ids.get(i)));
    }
    return out;
  }

  @Test
  void theEntityRebuildsEveryResultTheSessionCommits() {
    Random random = new Random(11);
    Session s = session();
    List<ContinuousSession.Entry> log = new ArrayList<>();
    for (int round = 0; round < 600; round++) {
      Session.Proposal p =
          s.propose(
              randomResult(random), round % 3 == 0 ? null : "0/" + Integer.toHexString(round));
      for (Session.Event e : p.events()) {
        log.add(new ContinuousSession.Entry(e.sequence(), e.type(), e.data()));
      }
      s.commit(p);
      List<ContinuousSession.Row> expected = new ArrayList<>();
      for (ResultRow r : s.current()) {
        expected.add(new ContinuousSession.Row(r.keyText(), r.row().toString()));
      }
      assertThat(MaterialisedResult.of(log)).as("round %d", round).isEqualTo(expected);
    }
    assertThat(log.stream().map(ContinuousSession.Entry::type).distinct())
        .contains("InitialResult", "RowAdded", "RowRemoved", "RowUpdated", "ResultReordered");
  }

  @Test
  void aLogThatDoesNotApplyIsUnknownNotGuessed() {
    List<ContinuousSession.Entry> log = new ArrayList<>();
    log.add(
        new ContinuousSession.Entry(
            1, "RowAdded", "{\"type\":\"RowAdded\",\"key\":[1],\"row\":{},\"position\":0}"));
    assertThat(MaterialisedResult.of(log)).as("no InitialResult first").isNull();
    log.add(
        0,
        new ContinuousSession.Entry(
            0, "InitialResult", "{\"type\":\"InitialResult\",\"rows\":[]}"));
    assertThat(MaterialisedResult.of(log)).containsExactly(new ContinuousSession.Row("[1]", "{}"));
    log.add(
        new ContinuousSession.Entry(
            2, "RowAdded", "{\"type\":\"RowAdded\",\"key\":[1],\"row\":{},\"position\":0}"));
    assertThat(MaterialisedResult.of(log)).as("the same key twice").isNull();
    assertThat(
            MaterialisedResult.of(
                List.of(
                    log.get(0),
                    log.get(1),
                    new ContinuousSession.Entry(
                        2, "RowUpdated", "{\"type\":\"RowAdded\",\"key\":[1],\"row\":{}}"))))
        .as("an entry whose data names another type")
        .isNull();
    assertThat(
            MaterialisedResult.of(
                List.of(
                    log.get(0),
                    log.get(1),
                    new ContinuousSession.Entry(
                        2,
                        "RowAdded",
                        "{\"type\":\"RowAdded\",\"key\":[2],\"row\":{},\"position\":5}"))))
        .as("a position past the end")
        .isNull();
    assertThat(
            MaterialisedResult.of(
                List.of(
                    log.get(0),
                    new ContinuousSession.Entry(
                        1, "ResultReordered", "{\"type\":\"ResultReordered\",\"keys\":[[9]]}"))))
        .as("a reorder naming another key")
        .isNull();
    assertThat(
            MaterialisedResult.of(
                List.of(
                    new ContinuousSession.Entry(
                        1, "InitialResult", "{\"type\":\"InitialResult\",\"rows\":[{\"key\":[1]"))))
        .as("truncated data")
        .isNull();
  }
}
