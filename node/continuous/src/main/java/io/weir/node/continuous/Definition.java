package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.continuous.spi.ContinuousEvaluator;
import io.weir.node.continuous.spi.ContinuousProjector;
import io.weir.persistence.Identifiers;
import java.util.ArrayList;
import java.util.List;

/**
 * A registered continuous query as stored in {@code weir.continuous_query.definition}: enough to
 * run it again after a restart. Its {@code toString} names columns and tables only (no SQL, no
 * values).
 *
 * @param sql the base query as registered (named parameters {@code :name})
 * @param parameters name -> JSON value (string, number, boolean or null), bound as JDBC parameters
 * @param keyColumns result columns that identify a row; ties of the order are broken by them
 * @param orderBy the order of the result before the key columns
 * @param limit N of the top-N
 * @param columns the result's column names, as PostgreSQL described them at registration
 * @param tables {@code schema.table} of every table the plan reads, or null when it could not be
 *     established (then every transaction counts as relevant)
 * @param columnTypes PostgreSQL type name of each column (as {@code columns}); null in
 *     registrations stored before it was recorded (such a session is maintained by full reads only)
 * @param impact how a change of a source table yields the affected result keys, or null when no
 *     rule could be proven (every relevant transaction then costs a full read)
 * @param maintenance {@code incremental} (null: the same) or {@code full} (never a scoped delta)
 * @param evaluator the name of the {@link ContinuousEvaluator} that replaces the scoped delta, or
 *     null (Weir's own scoped delta)
 * @param projector the name of the trusted {@link ContinuousProjector} (tier 1), or null
 * @param planFingerprint the plan's fingerprint (SQL, columns, types, keys, order); null in
 *     registrations stored before it was recorded
 */
public record Definition(
    String sql,
    ObjectNode parameters,
    List<String> keyColumns,
    List<OrderColumn> orderBy,
    int limit,
    List<String> columns,
    List<String> tables,
    List<String> columnTypes,
    Impact impact,
    String maintenance,
    String evaluator,
    String projector,
    String planFingerprint) {

  public Definition(
      String sql,
      ObjectNode parameters,
      List<String> keyColumns,
      List<OrderColumn> orderBy,
      int limit,
      List<String> columns,
      List<String> tables,
      List<String> columnTypes,
      Impact impact,
      String maintenance) {
    this(
        sql,
        parameters,
        keyColumns,
        orderBy,
        limit,
        columns,
        tables,
        columnTypes,
        impact,
        maintenance,
        null,
        null,
        null);
  }

  public Definition {
    keyColumns = List.copyOf(keyColumns);
    orderBy = List.copyOf(orderBy);
    columns = List.copyOf(columns);
    tables = tables == null ? null : List.copyOf(tables);
    columnTypes = columnTypes == null ? null : List.copyOf(columnTypes);
  }

  /** What an evaluator or projector sees of this registration. */
  ContinuousEvaluator.Query query() {
    return new ContinuousEvaluator.Query(
        sql(),
        parameters(),
        keyColumns(),
        columns(),
        columnTypes(),
        tables(),
        impact() == null ? null : impact().table());
  }

  /** Whether the registration allows the scoped delta (tier 2). */
  public boolean incremental() {
    return !"full".equals(maintenance);
  }

  /**
   * The impact rule of the one source table whose row gives each result row its key: a change of
   * that table affects exactly the result keys equal to the changed row's {@code sourceColumns},
   * old and new. Compiled at registration only when it can be proven (docs/continuous.md, "Impact
   * plan"); changes of other tables have no rule and cost a full read.
   *
   * @param table {@code schema.table}
   * @param sourceColumns for each key column (in {@code keyColumns} order), the table column it is
   * @param castTypes for each key column, its SQL type ({@code format_type}), for binding changed
   *     values back as keys
   * @param lookups rules for other tables of the set, each linked to T by an equality of plain
   *     integer columns (docs/continuous.md, "Lookup rules"); empty when none could be proven (or
   *     in registrations stored before they existed)
   * @param orderSources for each ORDER BY column (in {@code orderBy} order), the column of the
   *     table it is a plain reference to (PostgreSQL reports its origin), or null when one is not
   *     (or in registrations stored before this was recorded). With it, a changed row whose new
   *     values rank after the result's last row is known to stay out without a read.
   */
  public record Impact(
      String table,
      List<String> sourceColumns,
      List<String> castTypes,
      List<Lookup> lookups,
      List<String> orderSources) {
    public Impact {
      sourceColumns = List.copyOf(sourceColumns);
      castTypes = List.copyOf(castTypes);
      lookups = lookups == null ? List.of() : List.copyOf(lookups);
      orderSources = orderSources == null ? null : List.copyOf(orderSources);
    }

    public Impact(
        String table, List<String> sourceColumns, List<String> castTypes, List<Lookup> lookups) {
      this(table, sourceColumns, castTypes, lookups, null);
    }

    /** The same rule with {@code orderSources} (null: none). */
    public Impact withOrderSources(List<String> orderSources) {
      return new Impact(table, sourceColumns, castTypes, lookups, orderSources);
    }

    public Impact(String table, List<String> sourceColumns, List<String> castTypes) {
      this(table, sourceColumns, castTypes, List.of());
    }

    /** The lookup rule of {@code table}, or null. */
    public Lookup lookup(String table) {
      for (Lookup l : lookups) {
        if (l.table().equals(table)) {
          return l;
        }
      }
      return null;
    }
  }

  /**
   * A bounded authoritative lookup: a change of a row of {@code table} (J) can reach only the
   * result rows whose key-table row has {@code keyTableColumn} equal to the J row's {@code column},
   * old or new, because the plan joins J to the key table T by that equality and to nothing else.
   * The affected keys are then read from T, as the subscriber, in the delta's own transaction.
   *
   * @param table J, {@code schema.table}
   * @param column J's column in the equality
   * @param keyTableColumn T's column in the equality
   * @param castType T's column type ({@code format_type}; an integer type)
   */
  public record Lookup(String table, String column, String keyTableColumn, String castType) {}

  /**
   * The lookup of the key-table rows whose {@code lookup.keyTableColumn()} is one of {@code count}
   * values (parameters cast to its type): the distinct tuples of their key source columns as text,
   * at most {@code max} (distinct, so that repeated keys of hidden or duplicate rows cannot fill
   * the limit and crowd out a key).
   */
  public String lookupSql(Lookup lookup, int count, int max) {
    int dot = impact.table().indexOf('.');
    List<String> cols = new ArrayList<>();
    for (String c : impact.sourceColumns()) {
      cols.add(Identifiers.quote(c) + "::text");
    }
    StringBuilder values = new StringBuilder();
    for (int i = 0; i < count; i++) {
      values.append(i == 0 ? "" : ", ").append("?::").append(castType(lookup.castType()));
    }
    return "SELECT DISTINCT "
        + String.join(", ", cols)
        + " FROM "
        + Identifiers.quote(impact.table().substring(0, dot))
        + "."
        + Identifiers.quote(impact.table().substring(dot + 1))
        + " WHERE "
        + Identifiers.quote(lookup.keyTableColumn())
        + " IN ("
        + values
        + ") LIMIT "
        + max;
  }

  /**
   * One ORDER BY column; {@code descending} false is ascending. Nulls sort as PostgreSQL's default
   * for the direction.
   */
  public record OrderColumn(String column, boolean descending) {}

  /**
   * The authoritative query: the base as a subquery, ordered by {@link #orderBy} and then by the
   * key columns (ascending) not already named, limited to {@link #limit} rows. Column names are
   * quoted; they were checked against the described result at registration.
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
    return "SELECT * FROM ("
        + baseJdbcSql
        + "\n) AS weir_base ORDER BY "
        + String.join(", ", order)
        + " LIMIT "
        + limit;
  }

  /**
   * The scoped delta (tier 2): the base restricted to {@code count} key tuples, bound as parameters
   * after the base's own and cast to the key columns' types. PostgreSQL pushes the restriction into
   * the base (an index lookup on the source table where it has one).
   */
  public String scoped(String baseJdbcSql, int count) {
    if (impact == null || count < 1) {
      throw new IllegalStateException("no impact rule");
    }
    StringBuilder keys = new StringBuilder();
    List<String> cols = new ArrayList<>();
    for (String k : keyColumns) {
      cols.add("weir_base." + Identifiers.quote(k));
    }
    boolean single = keyColumns.size() == 1;
    for (int i = 0; i < count; i++) {
      keys.append(i == 0 ? "" : ", ").append(single ? "" : "(");
      for (int j = 0; j < keyColumns.size(); j++) {
        keys.append(j == 0 ? "" : ", ").append("?::").append(castType(impact.castTypes().get(j)));
      }
      keys.append(single ? "" : ")");
    }
    return "SELECT * FROM ("
        + baseJdbcSql
        + "\n) AS weir_base WHERE "
        + (single ? cols.get(0) : "(" + String.join(", ", cols) + ")")
        + " IN ("
        + keys
        + ")";
  }

  /**
   * The affected keys as result keys: each tuple cast to the key columns' types, read back like
   * result rows.
   */
  public String keyValues(int count) {
    StringBuilder rows = new StringBuilder();
    for (int i = 0; i < count; i++) {
      rows.append(i == 0 ? "(" : ", (");
      for (int j = 0; j < keyColumns.size(); j++) {
        rows.append(j == 0 ? "" : ", ").append("?::").append(castType(impact.castTypes().get(j)));
      }
      rows.append(")");
    }
    List<String> names = new ArrayList<>();
    for (String k : keyColumns) {
      names.add(Identifiers.quote(k));
    }
    return "SELECT * FROM (VALUES " + rows + ") AS weir_key(" + String.join(", ", names) + ")";
  }

  /**
   * A type name from {@code format_type}, spliced as a cast: letters, digits, spaces, quotes, dots,
   * brackets only.
   */
  static String castType(String type) {
    if (type == null || !type.matches("[A-Za-z0-9_ .\"()\\[\\],]{1,200}") || type.contains("--")) {
      throw new IllegalStateException("a key column's stored type is not a type name");
    }
    return type;
  }

  @Override
  public String toString() {
    return "Definition[keys="
        + keyColumns
        + ", limit="
        + limit
        + ", tables="
        + tables
        + ", impact="
        + (impact == null ? "none" : impact.table())
        + (evaluator == null ? "" : ", evaluator=" + evaluator)
        + (projector == null ? "" : ", projector=" + projector)
        + "]";
  }
}
