package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.continuous.spi.ContinuousEvaluator;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tier 2, the scoped delta ({@link ScopedDelta}, ADR 0019): reads the base query for the affected
 * keys only, as the subscriber in an authoritative transaction ({@link VisibilityGate}), or lets a
 * custom evaluator read them ({@link ContinuousEvaluator}), and merges the rows under the rank
 * rules. A transaction that changed a joined table with a lookup rule first reads, in the same
 * transaction, the keys of the key-table rows whose joined column has one of the changed values
 * (integers: lookup rules exist only for integer keys); more keys than the bound cost a full read.
 */
final class DeltaTier {
  private static final Logger log = LoggerFactory.getLogger(DeltaTier.class);

  private final ContinuousSettings settings;
  private final Map<String, ContinuousEvaluator> evaluators;
  private final VisibilityGate gate;

  DeltaTier(
      ContinuousSettings settings,
      Map<String, ContinuousEvaluator> evaluators,
      VisibilityGate gate) {
    this.settings = settings;
    this.evaluators = evaluators;
    this.gate = gate;
  }

  /** What the authoritative transaction found. */
  private static final class Read {
    final List<List<String>> tuples = new ArrayList<>();
    FallbackReason failure;
    long lookedUp;
    List<ResultRow> affected;
    List<ResultRow> fetched = List.of();
  }

  TierOutcome apply(Session s, ScopedDelta.Keys keys) {
    Definition d = s.registration.definition();
    List<List<String>> changed = new ArrayList<>(keys.keys.values());
    boolean lookups = !keys.lookupValues.isEmpty();
    ContinuousEvaluator evaluator = d.evaluator() == null ? null : evaluators.get(d.evaluator());
    if (d.evaluator() != null && evaluator == null) {
      // Registered on a node that had it; this one has not: the query stays correct by full reads.
      return new TierOutcome.Fallback(FallbackReason.EVALUATOR_MISSING, 0);
    }
    Read read =
        gate.read(
            s,
            c -> {
              Read r = new Read(); // a read taken again starts afresh
              r.tuples.addAll(changed);
              r.lookedUp = lookups ? lookupKeys(c, d, keys, r.tuples) : 0;
              if (r.lookedUp < 0) {
                r.failure =
                    r.lookedUp == -1 ? FallbackReason.BUDGET_EXCEEDED : FallbackReason.NULL_KEY;
                r.lookedUp = 0;
                return r;
              }
              if (r.tuples.isEmpty()) {
                return r; // no result row can depend on the changed rows
              }
              // The affected keys as the result spells them: integers are parsed (after the read);
              // other types are cast and read back by PostgreSQL here (their text form may depend
              // on settings).
              if (ScopedDelta.integerKeys(d.impact(), r.tuples) == null) {
                try (PreparedStatement ps = c.prepareStatement(d.keyValues(r.tuples.size()))) {
                  bindKeys(ps, 1, r.tuples);
                  r.affected = ScopeReader.rows(ps, d.keyColumns());
                }
              }
              if (evaluator != null) {
                List<ResultRow> rows = evaluated(evaluator, d, c, r.tuples);
                if (rows == null) {
                  r.failure = FallbackReason.EVALUATOR_FAILED;
                } else {
                  r.fetched = rows;
                }
                return r;
              }
              try (PreparedStatement ps =
                  c.prepareStatement(d.scoped(s.parsed.jdbcSql(), r.tuples.size()))) {
                ScopeReader.bind(ps, s.parsed.parameterOrder(), d.parameters());
                bindKeys(ps, s.parsed.parameterOrder().size() + 1, r.tuples);
                r.fetched = ScopeReader.rows(ps, d.keyColumns());
              }
              return r;
            });
    if (read == null) {
      return new TierOutcome.RepairPending(s.repairPending);
    }
    if (read.failure != null) {
      return new TierOutcome.Fallback(read.failure, read.lookedUp);
    }
    if (evaluator != null) {
      s.evaluatorTransactions++;
    }
    Set<String> affectedKeys = ScopedDelta.integerKeys(d.impact(), read.tuples);
    if (affectedKeys == null) {
      affectedKeys = new HashSet<>();
      for (ResultRow r : read.affected) {
        affectedKeys.add(r.keyText());
      }
    }
    ScopedDelta.Outcome outcome =
        ScopedDelta.merge(s.current(), affectedKeys, read.fetched, d.limit(), s.order);
    long rowsRead = read.lookedUp + read.fetched.size();
    return outcome.fallback() != null
        ? new TierOutcome.Fallback(outcome.fallback(), rowsRead)
        : new TierOutcome.Applied(outcome.result(), rowsRead, lookups);
  }

  /**
   * Adds to {@code tuples} the keys of the key-table rows that the lookup rules name for the
   * changed values (as the subscriber, in the delta's transaction). Returns the rows read, or -1
   * when the keys exceed the bound, -2 when a key column is null (a result row with a null key,
   * which no {@code IN (...)} reads).
   */
  private long lookupKeys(
      Connection c, Definition d, ScopedDelta.Keys keys, List<List<String>> tuples)
      throws SQLException {
    int bound = settings.affectedKeyLimit();
    Set<String> seen = new HashSet<>(keys.keys.keySet());
    int width = d.impact().sourceColumns().size();
    long read = 0;
    for (Map.Entry<Definition.Lookup, Set<String>> e : keys.lookupValues.entrySet()) {
      List<String> values = new ArrayList<>(e.getValue());
      try (PreparedStatement ps =
          c.prepareStatement(d.lookupSql(e.getKey(), values.size(), bound + 1))) {
        for (int i = 0; i < values.size(); i++) {
          ps.setString(i + 1, values.get(i));
        }
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            read++;
            List<String> key = new ArrayList<>(width);
            for (int j = 1; j <= width; j++) {
              key.add(rs.getString(j));
            }
            if (key.contains(null)) {
              return -2;
            }
            if (seen.add(String.join("\u0000", key))) {
              tuples.add(key);
            }
          }
        }
      }
    }
    return tuples.size() > bound ? -1 : read;
  }

  /**
   * Runs a custom evaluator in the authoritative transaction and checks its rows' shape: exactly
   * the query's columns and a non-null key. Null when it threw or a row has another shape (the
   * caller falls back to a full read); a SQL failure propagates like a scoped delta's.
   */
  private static List<ResultRow> evaluated(
      ContinuousEvaluator evaluator, Definition d, Connection c, List<List<String>> tuples)
      throws SQLException {
    ContinuousEvaluator.Query query = d.query();
    List<ObjectNode> rows;
    try {
      rows =
          evaluator.evaluate(
              new ContinuousEvaluator.Context() {
                @Override
                public ContinuousEvaluator.Query query() {
                  return query;
                }

                @Override
                public Connection connection() {
                  return c;
                }

                @Override
                public List<ObjectNode> rows(PreparedStatement statement) throws SQLException {
                  List<ObjectNode> out = new ArrayList<>();
                  for (ResultRow r : ScopeReader.rows(statement, d.keyColumns())) {
                    out.add(r.row());
                  }
                  return out;
                }
              },
              tuples);
    } catch (SQLException e) {
      throw e;
    } catch (RuntimeException e) {
      log.warn(
          "continuous evaluator {} failed ({}); falling back to a full read",
          evaluator.name(),
          e.getClass().getSimpleName());
      return null;
    }
    return rows == null ? null : ResultRow.checked(d, rows);
  }

  private static void bindKeys(PreparedStatement ps, int first, List<List<String>> tuples)
      throws SQLException {
    int i = first;
    for (List<String> tuple : tuples) {
      for (String v : tuple) {
        ps.setString(i++, v);
      }
    }
  }
}
