package io.weir.node.continuous;

import java.util.Arrays;
import java.util.List;

/**
 * Why a session's query is read in full (tier 3): the {@link Cause}, which is the {@code cause} tag
 * of {@code weir.continuous.full.reads}, and the key the session's status counts the read under
 * ({@code fullRepairsByReason}), which names the rule or failure behind a fallback or a retry.
 */
record FullRead(Cause cause, String key) {

  /** What started a full read. */
  enum Cause {
    /** The session's first result, or a transaction that released a result not yet analysed. */
    INITIAL("initial"),
    /** Every K transactions maintained incrementally, or every T (docs/continuous.md). */
    PERIODIC("periodic"),
    /** A safety rule refused the incremental result ({@link FallbackReason}). */
    FALLBACK("fallback"),
    /** The previous read failed; the session was repair-pending. */
    RETRY("retry"),
    /** The pipeline restarted: what it delivers again is not known to be covered. */
    PIPELINE_RESTART("pipeline-restart"),
    /** Policies, memberships, grants or the definitions the plan uses changed. */
    CATALOG_CHANGED("catalog-changed"),
    /** A query whose planning was deferred was planned again; read with its new plan. */
    REPLANNED("replanned"),
    /** A held full read's snapshot lacked a delivered transaction: published, then read again. */
    BEHIND_HELD_READ("behind-held-read"),
    /** The query is maintained by full reads only (its status says why). */
    FULL_READS_ONLY("full-reads-only");

    private final String wire;

    Cause(String wire) {
      this.wire = wire;
    }

    String wire() {
      return wire;
    }

    /** The {@code cause} tag's values, in declaration order. */
    static List<String> wires() {
      return Arrays.stream(values()).map(Cause::wire).toList();
    }
  }

  static final FullRead INITIAL = of(Cause.INITIAL);
  static final FullRead PERIODIC = of(Cause.PERIODIC);
  static final FullRead PIPELINE_RESTART = of(Cause.PIPELINE_RESTART);
  static final FullRead CATALOG_CHANGED = of(Cause.CATALOG_CHANGED);
  static final FullRead BEHIND_HELD_READ = of(Cause.BEHIND_HELD_READ);
  static final FullRead REPLANNED = of(Cause.REPLANNED);

  private static FullRead of(Cause cause) {
    return new FullRead(cause, cause.wire());
  }

  /** A read instead of an incremental result {@code reason} refused. */
  static FullRead fallback(FallbackReason reason) {
    return new FullRead(Cause.FALLBACK, "fallback-" + reason.wireName());
  }

  /** A read again after one that failed for {@code failure} (a value-free reason). */
  static FullRead retryAfter(String failure) {
    return new FullRead(Cause.RETRY, "retry-after-" + failure);
  }

  /** A read of a query maintained by full reads only, for {@code why}. */
  static FullRead fullReadsOnly(String why) {
    return new FullRead(Cause.FULL_READS_ONLY, why);
  }
}
