package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class ResultDiffTest {

  private static ResultRow row(int id, int score) {
    ArrayNode key = JsonNodeFactory.instance.arrayNode().add(id);
    ObjectNode row = JsonNodeFactory.instance.objectNode().put("id", id).put("score", score);
    return new ResultRow(key.toString(), key, row);
  }

  private static List<String> types(List<ObjectNode> events) {
    return events.stream().map(e -> e.get("type").asText()).toList();
  }

  @Test
  void tailDisplacementIsAnAddAndARemove() {
    List<ResultRow> before = List.of(row(1, 90), row(2, 80), row(3, 70));
    List<ResultRow> after = List.of(row(1, 90), row(4, 85), row(2, 80));
    List<ObjectNode> events = ResultDiff.diff(before, after);
    assertThat(types(events)).containsExactly("RowRemoved", "RowAdded");
    assertThat(events.get(1).get("position").asInt()).isEqualTo(1);
    assertThat(ResultDiff.apply(before, events)).isEqualTo(after);
  }

  @Test
  void rankChangeOfKeptRowsIsReordered() {
    List<ResultRow> before = List.of(row(1, 90), row(2, 80));
    List<ResultRow> after = List.of(row(2, 95), row(1, 90));
    List<ObjectNode> events = ResultDiff.diff(before, after);
    assertThat(types(events)).containsExactly("RowUpdated", "ResultReordered");
    assertThat(ResultDiff.apply(before, events)).isEqualTo(after);
  }

  @Test
  void unchangedResultHasNoEvents() {
    List<ResultRow> rows = List.of(row(1, 90), row(2, 80));
    assertThat(ResultDiff.diff(rows, new ArrayList<>(rows))).isEmpty();
  }

  @Test
  void randomResultsRebuildExactly() {
    Random random = new Random(42);
    for (int round = 0; round < 2000; round++) {
      List<ResultRow> before = randomResult(random);
      List<ResultRow> after = randomResult(random);
      assertThat(ResultDiff.apply(before, ResultDiff.diff(before, after)))
          .as("applying the events to the old result should give the new one (round %d)", round)
          .isEqualTo(after);
    }
  }

  private static List<ResultRow> randomResult(Random random) {
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      ids.add(i);
    }
    java.util.Collections.shuffle(ids, random);
    List<ResultRow> out = new ArrayList<>();
    for (int i = 0; i < random.nextInt(8); i++) {
      out.add(row(ids.get(i), random.nextInt(3)));
    }
    return out;
  }
}
