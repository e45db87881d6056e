package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.Identifiers;
import java.util.ArrayList;
import java.util.List;

/**
 * A registered continuous query as stored in {@code weir.continuous_query.definition}: enough to run
 * it again after a restart. Its {@code toString} names columns and tables only (no SQL, no values).
 *
 * @param sql the base query as registered (named parameters {@code :name})
 * @param parameters name -> JSON value (string, number, boolean or null), bound as JDBC parameters
 * @param keyColumns result columns that identify a row; ties of the order are broken by them
 * @param orderBy the order of the result before the key columns
 * @param limit N of the top-N
 * @param columns the result's column names, as PostgreSQL described them at registration
 * @param tables {@code schema.table} of every table the plan reads, or null when it could not be
 *     established (then every transaction counts as relevant)
 */
public record Definition(
    String sql, ObjectNode parameters, List<String> keyColumns, List<OrderColumn> orderBy, int limit,
    List<String> columns, List<String> tables) {

  public Definition {
    keyColumns = List.copyOf(keyColumns);
    orderBy = List.copyOf(orderBy);
    columns = List.copyOf(columns);
    tables = tables == null ? null : List.copyOf(tables);
  }

  /** One ORDER BY column; {@code descending} false is ascending. Nulls sort as PostgreSQL's default for the direction. */
  public record OrderColumn(String column, boolean descending) {}

  /**
   * The authoritative query: the base as a subquery, ordered by {@link #orderBy} and then by the key
   * columns (ascending) not already named, limited to {@link #limit} rows. Column names are quoted;
   * they were checked against the described result at registration.
   */
  public String wrapped(String baseJdbcSql) {
    List<String> order = new ArrayList<>();
    List<String> named = new ArrayList<>();
    for (OrderColumn o : orderBy) {
      order.add("weir_base." + Identifiers.quote(o.column()) + (o.descending() ? " DESC" : " ASC"));
      named.add(o.column());
    }
    for (String k : keyColumns) {
      if (!named.contains(k)) {
        order.add("weir_base." + Identifiers.quote(k) + " ASC");
      }
    }
    return "SELECT * FROM (" + baseJdbcSql + "\n) AS weir_base ORDER BY " + String.join(", ", order) + " LIMIT " + limit;
  }

  @Override
  public String toString() {
    return "Definition[keys=" + keyColumns + ", limit=" + limit + ", tables=" + tables + "]";
  }
}
