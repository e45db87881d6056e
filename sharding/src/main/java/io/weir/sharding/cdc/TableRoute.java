package io.weir.sharding.cdc;

import io.weir.persistence.cdc.sink.SinkException;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.partition.Partitioning;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.util.ArrayList;
import java.util.List;

/** How one table's rows become documents: collection, id columns, partition-key columns. */
record TableRoute(String collection, int[] id, int[] partitionKey, int partitions) {
  /**
   * Why a table's rows cannot become documents: {@code code} is the typed reason ({@code
   * no-row-identity}, {@code id-columns-required}, {@code no-document-id}, {@code
   * id-column-missing}, {@code id-column-not-identity}), {@code detail} names the table and columns
   * and says what to do.
   */
  static final class Refused extends RuntimeException {
    final String code;

    Refused(String code, String detail) {
      super(detail, null, false, false);
      this.code = code;
    }
  }

  static TableRoute of(TableSchema table, PartitionSink.Settings settings) {
    String name = table.qualifiedName();
    if (table.replicaIdentity() == ReplicaIdentity.NOTHING) {
      throw new Refused(
          "no-row-identity",
          "table " + name + " has REPLICA IDENTITY NOTHING: its rows cannot become documents");
    }
    int[] id;
    if (settings.idColumns().containsKey(name)) {
      id = columns(table, settings.idColumns().get(name), "id column");
    } else if (table.replicaIdentity() == ReplicaIdentity.FULL) {
      throw new Refused(
          "id-columns-required",
          "table "
              + name
              + " has REPLICA IDENTITY FULL: configure its id columns (sink.id-columns)");
    } else {
      id = table.keyIndexes();
    }
    if (id.length == 0) {
      throw new Refused(
          "no-document-id",
          "table "
              + name
              + " has neither a primary key nor a replica identity index, so its rows have no"
              + " document id: give it a primary key, or set REPLICA IDENTITY FULL and configure"
              + " its id columns (sink.id-columns)");
    }
    int[] pk =
        settings.partitionKeys().containsKey(name)
            ? columns(table, settings.partitionKeys().get(name), "partition-key column")
            : id;
    return new TableRoute(
        settings.collections().getOrDefault(name, name), id, pk, settings.partitions());
  }

  private static int[] columns(TableSchema table, List<String> names, String what) {
    int[] out = new int[names.size()];
    for (int i = 0; i < names.size(); i++) {
      int at = table.indexOf(names.get(i));
      if (at < 0) {
        throw new Refused(
            "id-column-missing",
            "table " + table.qualifiedName() + " has no published " + what + " " + names.get(i));
      }
      if (!table.columns().get(at).key()) {
        throw new Refused(
            "id-column-not-identity",
            "table "
                + table.qualifiedName()
                + ": "
                + what
                + " "
                + names.get(i)
                + " is not in the replica identity, so a DELETE could not be routed");
      }
      out[i] = at;
    }
    return out;
  }

  String id(TupleData row) {
    return key(row, id, null);
  }

  int partition(TupleData row) {
    return Partitioning.partitionOf(collection, key(row, partitionKey, null), partitions);
  }

  /** The id of {@code row}, a key column sent as unchanged TOAST taken from {@code old}. */
  String id(TupleData row, TupleData old) {
    return key(row, id, old);
  }

  int partition(TupleData row, TupleData old) {
    return Partitioning.partitionOf(collection, key(row, partitionKey, old), partitions);
  }

  private String key(TupleData row, int[] columns, TupleData old) {
    List<String> values = new ArrayList<>(columns.length);
    for (int c : columns) {
      TupleData from =
          row.isUnchangedToast(c) && old != null && !old.isUnchangedToast(c) ? old : row;
      if (from.isNull(c) || from.isUnchangedToast(c)) {
        throw SinkException.permanent("a key column of " + collection + " carries no value", null);
      }
      values.add(from.text(c));
    }
    return Partitioning.canonicalKey(values);
  }
}
