package io.weir.node.continuous;

import io.weir.node.continuous.spi.ContinuousProjector;
import java.sql.PreparedStatement;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tier 3: one authoritative read of the session's whole query, as the subscriber in a transaction
 * whose snapshot includes every delivered transaction ({@link VisibilityGate}). The source of truth
 * every other tier falls back to; a failure leaves the result as it was with a repair pending.
 */
final class FullReadTier {
  private static final Logger log = LoggerFactory.getLogger(FullReadTier.class);

  private final Map<String, ContinuousProjector> projectors;
  private final VisibilityGate gate;

  FullReadTier(Map<String, ContinuousProjector> projectors, VisibilityGate gate) {
    this.projectors = projectors;
    this.gate = gate;
  }

  /** The query's rows now ({@link TierOutcome.Applied}), or a pending repair. */
  TierOutcome read(Session s) {
    Definition d = s.registration.definition();
    String sql = d.wrapped(s.parsed.jdbcSql());
    boolean recheck = d.projector() != null && s.projectorOff == null && !s.initialised();
    String[] projectorOff = new String[1];
    List<ResultRow> rows =
        gate.read(
            s,
            c -> {
              if (recheck) {
                // A session starting (after a restart or on another node) trusts its projector only
                // if the registration's conditions still hold in today's catalog.
                projectorOff[0] =
                    Registrar.projectorConditions(c, projectors.get(d.projector()), d);
              }
              try (PreparedStatement ps = c.prepareStatement(sql)) {
                ScopeReader.bind(ps, s.parsed.parameterOrder(), d.parameters());
                return ScopeReader.rows(ps, d.keyColumns());
              }
            });
    if (rows == null) {
      return new TierOutcome.RepairPending(s.repairPending);
    }
    if (projectorOff[0] != null) {
      s.projectorOff = projectorOff[0];
      log.warn(
          "continuous query {}: its projector is no longer used: {}",
          s.registration.id(),
          projectorOff[0]);
    }
    Set<String> seen = new HashSet<>();
    for (ResultRow r : rows) {
      if (!seen.add(r.keyText())) {
        s.failed("duplicate-key");
        return new TierOutcome.RepairPending(s.repairPending);
      }
    }
    return new TierOutcome.Applied(rows, rows.size(), false);
  }
}
