package io.weir.node.continuous.spi;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Tier 1, a trusted CDC projector: computes the affected result rows from a transaction's change
 * tuples alone, without reading PostgreSQL. Found with {@link java.util.ServiceLoader} like a
 * {@link ContinuousEvaluator} and used only for a registration that names it ({@code "projector":
 * "<name>"}) and only while every condition of the tier 1 holds:
 *
 * <ul>
 *   <li>its {@link #fingerprint()} equals the registration's plan fingerprint (it was written for
 *       exactly this query: SQL, columns, types, keys and order);
 *   <li>the query reads one table, the one its keys come from, and that table has {@code REPLICA
 *       IDENTITY FULL} (complete old values of updates and deletes);
 *   <li>if the table has row-level security on, the projector declares {@link
 *       #enforcesRowSecurity()}: it applies the subscriber's policy itself, given its login role;
 *   <li>in each transaction, every change of the table carries complete old and new values (no
 *       unchanged-TOAST column), so the changed columns are known exactly.
 * </ul>
 *
 * Otherwise it is never invoked and the scoped delta (tier 2) runs. Its rows go through the same
 * shape check and merge rule as a delta's; {@code null} (uncertain) or an exception fall back to
 * tier 2. Periodic full reads still run.
 */
public interface ContinuousProjector {
  /** The name registrations use: 1 to 64 letters, digits, {@code -} or {@code _}. */
  String name();

  /**
   * The plan fingerprint this projector was written for (shown as {@code planFingerprint} in a
   * session's status).
   */
  String fingerprint();

  /** Whether {@link #project} applies the row-level security of the subscriber's login itself. */
  boolean enforcesRowSecurity();

  /**
   * The result rows, after {@code changes}, of every key the changes touched (old and new keys);
   * keys without a row afterwards are absent. Each row has exactly the query's columns, with the
   * JSON types Weir's reads give (numbers for integer and numeric columns, strings for text).
   * {@code null} when the projector cannot tell.
   *
   * @param loginRole the PostgreSQL login the subscriber's scope reads as
   * @param changes the transaction's changes of the query's table, in commit order
   */
  List<ObjectNode> project(
      ContinuousEvaluator.Query query, String loginRole, List<RowChange> changes);

  /**
   * One change of a row, with complete images as pgoutput's text values (null for SQL NULL).
   *
   * @param kind {@code insert}, {@code update} or {@code delete}
   * @param before the old row (null for an insert)
   * @param after the new row (null for a delete)
   * @param changed the columns whose value differs between before and after (all for insert/delete)
   */
  record RowChange(
      String table,
      String kind,
      Map<String, String> before,
      Map<String, String> after,
      Set<String> changed) {
    @Override
    public String toString() {
      return "RowChange[" + table + ", " + kind + ", changed=" + changed + "]";
    }
  }
}
