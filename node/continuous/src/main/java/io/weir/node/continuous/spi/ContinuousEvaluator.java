package io.weir.node.continuous.spi;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.List;

/**
 * A custom evaluator: replaces the scoped delta (tier 2) for the continuous queries it covers
 * exactly. Nodes find evaluators with {@link java.util.ServiceLoader} (a jar on the node's class
 * path listing its class in {@code
 * META-INF/services/io.weir.node.continuous.spi.ContinuousEvaluator}); a registration opts in with
 * {@code "evaluator": "<name>"}.
 *
 * <p>Weir keeps every safety rule: it computes the affected keys from the impact plan, runs the
 * evaluator in the same authoritative transaction a scoped delta would use (the subscriber's own
 * login, read-only, statement timeout, a snapshot that includes every delivered transaction),
 * checks the rows' shape and merges them with the same rule; anything the rule cannot prove still
 * costs a full read of the registered query, which stays the source of truth. An evaluator that
 * throws or returns rows of another shape sends the session to a full read (fallback {@code
 * evaluator-failed}).
 */
public interface ContinuousEvaluator {
  /**
   * The name registrations use: 1 to 64 letters, digits, {@code -} or {@code _}; unique on the
   * node.
   */
  String name();

  /**
   * Whether {@link #evaluate} returns, for every set of affected keys, exactly the rows the base
   * query returns for those keys. Asked at registration; {@code false} refuses the registration
   * (400), it never silently falls back.
   */
  boolean covers(Query query);

  /**
   * The base query's rows whose key is one of {@code keys}: each a JSON object with exactly the
   * query's {@link Query#columns()}, values as {@link Context#rows} produces them. Keys with no row
   * (deleted, or no longer matching) are simply absent.
   *
   * @param keys the affected key tuples, each the key columns' values as text (old and new values
   *     of the changed rows)
   */
  List<ObjectNode> evaluate(Context context, List<List<String>> keys) throws SQLException;

  /**
   * What an evaluator sees of a registration.
   *
   * @param sql the base query as registered ({@code :name} parameters)
   * @param parameters the bound parameter values
   * @param columns the result's columns, with PostgreSQL's {@code columnTypes}
   * @param impactTable {@code schema.table} whose changed rows give the affected keys
   */
  record Query(
      String sql,
      ObjectNode parameters,
      List<String> keyColumns,
      List<String> columns,
      List<String> columnTypes,
      List<String> tables,
      String impactTable) {
    public Query {
      keyColumns = List.copyOf(keyColumns);
      columns = List.copyOf(columns);
      columnTypes = List.copyOf(columnTypes);
      tables = tables == null ? null : List.copyOf(tables);
    }

    @Override
    public String toString() {
      return "Query[keys=" + keyColumns + ", tables=" + tables + "]";
    }
  }

  /** The authoritative transaction an evaluation runs in. */
  interface Context {
    Query query();

    /**
     * The subscriber's connection: read-only, its row-level security applies. Do not commit or
     * close it.
     */
    Connection connection();

    /**
     * Runs {@code statement} and converts its rows exactly as Weir converts the base query's rows.
     */
    List<ObjectNode> rows(PreparedStatement statement) throws SQLException;
  }
}
