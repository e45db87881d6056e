package io.weir.protocol.cdc;

import io.weir.protocol.pgoutput.ReplicaIdentity;
import java.util.ArrayList;
import java.util.List;

/**
 * A published table's shape as the pipeline last accepted it: names, type OIDs and which columns
 * form the replica identity (the key a DELETE or key-changing UPDATE carries).
 *
 * @param relationId the table's OID on the source server
 */
public record TableSchema(
    long relationId,
    String schema,
    String table,
    ReplicaIdentity replicaIdentity,
    List<Column> columns) {

  public TableSchema {
    columns = List.copyOf(columns);
  }

  /**
   * @param key whether the column is part of the replica identity
   * @param typeModifier {@code atttypmod}, -1 if none
   */
  public record Column(String name, long typeOid, int typeModifier, boolean key) {}

  /** {@code schema.table}, unquoted. */
  public String qualifiedName() {
    return schema + "." + table;
  }

  public List<String> columnNames() {
    return columns.stream().map(Column::name).toList();
  }

  /** Indexes of the replica identity columns, in column order. */
  public int[] keyIndexes() {
    List<Integer> keys = new ArrayList<>();
    for (int i = 0; i < columns.size(); i++) {
      if (columns.get(i).key()) {
        keys.add(i);
      }
    }
    return keys.stream().mapToInt(Integer::intValue).toArray();
  }

  public int indexOf(String column) {
    for (int i = 0; i < columns.size(); i++) {
      if (columns.get(i).name().equals(column)) {
        return i;
      }
    }
    return -1;
  }
}
