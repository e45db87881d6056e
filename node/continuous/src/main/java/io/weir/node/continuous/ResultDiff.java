package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The events that turn one materialised result into the next. A client applies them in order:
 *
 * <ol>
 *   <li>{@code RowRemoved {key}}: drop the row;
 *   <li>{@code RowAdded {key, row, position}} and {@code RowUpdated {key, row, position}}, in
 *       ascending position: insert the new row at {@code position} (0-based, in the new result), or
 *       replace the row's values;
 *   <li>{@code ResultReordered {keys}} (only when rows present before and after changed their
 *       relative order): the complete new order of keys.
 * </ol>
 *
 * Without a {@code ResultReordered}, the rows kept keep their relative order, so inserting added
 * rows at their positions in ascending order yields the new result. {@link #apply} is that client.
 */
final class ResultDiff {
  private ResultDiff() {}

  static List<ObjectNode> diff(List<ResultRow> before, List<ResultRow> after) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    Map<String, ResultRow> old = new HashMap<>();
    before.forEach(r -> old.put(r.keyText(), r));
    Map<String, ResultRow> now = new HashMap<>();
    after.forEach(r -> now.put(r.keyText(), r));
    List<ObjectNode> events = new ArrayList<>();
    for (ResultRow r : before) {
      if (!now.containsKey(r.keyText())) {
        ObjectNode e = f.objectNode().put("type", "RowRemoved");
        e.set("key", r.key());
        events.add(e);
      }
    }
    List<String> keptBefore = new ArrayList<>();
    for (ResultRow r : before) {
      if (now.containsKey(r.keyText())) {
        keptBefore.add(r.keyText());
      }
    }
    List<String> keptAfter = new ArrayList<>();
    for (int i = 0; i < after.size(); i++) {
      ResultRow r = after.get(i);
      ResultRow was = old.get(r.keyText());
      if (was == null || !was.row().equals(r.row())) {
        ObjectNode e = f.objectNode().put("type", was == null ? "RowAdded" : "RowUpdated");
        e.set("key", r.key());
        e.set("row", r.row());
        e.put("position", i);
        events.add(e);
      }
      if (was != null) {
        keptAfter.add(r.keyText());
      }
    }
    if (!keptBefore.equals(keptAfter)) {
      ObjectNode e = f.objectNode().put("type", "ResultReordered");
      ArrayNode keys = e.putArray("keys");
      after.forEach(r -> keys.add(r.key()));
      events.add(e);
    }
    return events;
  }

  /**
   * Applies {@code events} (from {@link #diff}) to {@code rows} as a client would: the reference
   * for tests.
   */
  static List<ResultRow> apply(List<ResultRow> rows, List<ObjectNode> events) {
    List<ResultRow> out = new ArrayList<>(rows);
    for (ObjectNode e : events) {
      String type = e.get("type").asText();
      String key = e.get("key") == null ? null : e.get("key").toString();
      switch (type) {
        case "RowRemoved" -> out.removeIf(r -> r.keyText().equals(key));
        case "RowAdded" ->
            out.add(
                e.get("position").asInt(),
                new ResultRow(key, (ArrayNode) e.get("key"), (ObjectNode) e.get("row")));
        case "RowUpdated" -> {
          for (int i = 0; i < out.size(); i++) {
            if (out.get(i).keyText().equals(key)) {
              out.set(i, new ResultRow(key, (ArrayNode) e.get("key"), (ObjectNode) e.get("row")));
            }
          }
        }
        case "ResultReordered" -> {
          Map<String, ResultRow> byKey = new HashMap<>();
          out.forEach(r -> byKey.put(r.keyText(), r));
          out.clear();
          e.get("keys").forEach(k -> out.add(byKey.get(k.toString())));
        }
        default -> throw new IllegalArgumentException("unknown event type");
      }
    }
    return out;
  }
}
