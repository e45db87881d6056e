package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.continuous.spi.ContinuousProjector;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tier 1: the session's trusted projector ({@link ContinuousProjector}) computes the affected rows
 * from the change tuples, without reading PostgreSQL; its rows get the same shape check and merge
 * rule as a scoped delta's. A projector that is missing, uncertain or meets an incomplete image
 * hands over to the scoped delta; a merge the rule cannot prove, to a full read.
 */
final class ProjectorTier {
  private static final Logger log = LoggerFactory.getLogger(ProjectorTier.class);

  private final Map<String, ContinuousProjector> projectors;

  ProjectorTier(Map<String, ContinuousProjector> projectors) {
    this.projectors = projectors;
  }

  TierOutcome apply(Session s, ScopedDelta.Keys keys) {
    Definition d = s.registration.definition();
    ContinuousProjector projector = projectors.get(d.projector());
    FallbackReason gap = projector == null ? FallbackReason.PROJECTOR_MISSING : keys.projectorGap;
    if (gap != null) {
      return new TierOutcome.Fallback(gap, 0);
    }
    List<ObjectNode> projected;
    try {
      projected = projector.project(d.query(), s.registration.loginRole(), keys.rowChanges);
    } catch (RuntimeException e) {
      log.warn(
          "continuous projector {} failed ({}); using the scoped delta",
          projector.name(),
          e.getClass().getSimpleName());
      projected = null;
    }
    List<ResultRow> rows = projected == null ? null : ResultRow.checked(d, projected);
    if (rows == null) {
      return new TierOutcome.Fallback(FallbackReason.PROJECTOR_UNCERTAIN, 0);
    }
    // Every affected key (old and new) is spelled as the result spells it only for integer keys
    // without a read; other key types go to the scoped delta, which reads them back.
    Set<String> affectedKeys =
        ScopedDelta.integerKeys(d.impact(), new ArrayList<>(keys.keys.values()));
    if (affectedKeys == null) {
      return new TierOutcome.Fallback(FallbackReason.PROJECTOR_KEY_TYPE, 0);
    }
    ScopedDelta.Outcome outcome =
        ScopedDelta.merge(s.current(), affectedKeys, rows, d.limit(), s.order);
    return outcome.fallback() != null
        ? new TierOutcome.Fallback(outcome.fallback(), 0)
        : new TierOutcome.Applied(outcome.result(), 0, false);
  }
}
