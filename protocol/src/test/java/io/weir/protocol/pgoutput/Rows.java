package io.weir.protocol.pgoutput;

import io.weir.protocol.pgoutput.PgOutputMessage.Delete;
import io.weir.protocol.pgoutput.PgOutputMessage.Insert;
import io.weir.protocol.pgoutput.PgOutputMessage.Relation;
import io.weir.protocol.pgoutput.PgOutputMessage.Update;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Replays decoded messages the way a consumer would, keeping the latest Relation per id, and turns
 * each row change into column-name-to-value maps for assertions.
 */
final class Rows {

  /** Stands in for an unchanged TOAST column, which has no value. */
  static final String UNCHANGED = "<unchanged toast>";

  /** How a {@code byte[]} value appears in a row map, so that maps compare by content. */
  static String hex(byte[] bytes) {
    return "hex:" + HexFormat.of().formatHex(bytes);
  }

  /** One row change; {@code before} is null when the message carries no old tuple. */
  record Change(
      MessageType type, String table, Map<String, Object> before, Map<String, Object> after) {}

  private Rows() {}

  static List<Change> changes(List<PgOutputMessage> messages) {
    Map<Long, Relation> relations = new HashMap<>();
    List<Change> changes = new ArrayList<>();
    for (PgOutputMessage message : messages) {
      if (message instanceof Relation relation) {
        relations.put(relation.relationId(), relation);
      } else if (message instanceof Insert insert) {
        Relation relation = relations.get(insert.relationId());
        changes.add(
            new Change(message.type(), relation.name(), null, row(insert.newTuple(), relation)));
      } else if (message instanceof Update update) {
        Relation relation = relations.get(update.relationId());
        Map<String, Object> before = update.old().map(old -> row(old, relation)).orElse(null);
        changes.add(
            new Change(message.type(), relation.name(), before, row(update.newTuple(), relation)));
      } else if (message instanceof Delete delete) {
        Relation relation = relations.get(delete.relationId());
        changes.add(
            new Change(message.type(), relation.name(), row(delete.oldTuple(), relation), null));
      }
    }
    return changes;
  }

  static Map<String, Object> row(TupleData tuple, Relation relation) {
    tuple.requireColumnCount(relation);
    Map<String, Object> row = new LinkedHashMap<>();
    for (int i = 0; i < tuple.size(); i++) {
      String column = relation.columns().get(i).name();
      if (tuple.isUnchangedToast(i)) {
        row.put(column, UNCHANGED);
      } else {
        PgValue value = tuple.value(i, relation);
        Object converted = value == null ? null : value.value();
        row.put(column, converted instanceof byte[] bytes ? hex(bytes) : converted);
      }
    }
    return row;
  }
}
