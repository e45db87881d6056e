package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

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
}
