package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * One row of a materialised result: its key (the key columns' values, as a JSON array) and the
 * whole row (column -> value). {@code keyText} is the key's canonical JSON, used for identity.
 * {@code toString} carries no values.
 */
public record ResultRow(String keyText, ArrayNode key, ObjectNode row) {
  @Override
  public String toString() {
    return "ResultRow[" + row.size() + " columns]";
  }

  /**
   * Rows a plugin (evaluator, projector) produced, as result rows when each has exactly {@code d}'s
   * columns and a non-null key; else null.
   */
  static List<ResultRow> checked(Definition d, List<ObjectNode> rows) {
    Set<String> columns = new HashSet<>(d.columns());
    List<ResultRow> out = new ArrayList<>(rows.size());
    for (ObjectNode row : rows) {
      if (row == null || row.size() != columns.size()) {
        return null;
      }
      for (var it = row.fieldNames(); it.hasNext(); ) {
        if (!columns.contains(it.next())) {
          return null;
        }
      }
      ArrayNode key = JsonNodeFactory.instance.arrayNode();
      for (String k : d.keyColumns()) {
        if (row.get(k).isNull()) {
          return null;
        }
        key.add(row.get(k));
      }
      out.add(new ResultRow(key.toString(), key, row));
    }
    return out;
  }
}
