package io.weir.node.continuous;

/**
 * Why a tier could not prove a session's new result, each with the tier that runs instead. The wire
 * names are what a session's status ({@code fallbacksByReason}), the full-read causes ({@code
 * fallback-<name>}) and the {@code weir.continuous.fallbacks} metric's {@code reason} tag show
 * (docs/continuous.md): bounded names, never values.
 */
public enum FallbackReason {
  /** A change of a table the impact plan has no rule for. */
  NO_IMPACT_RULE("no-impact-rule", Next.FULL_READ),
  TRUNCATE("truncate", Next.FULL_READ),
  /** A row whose shape the pipeline's schema does not describe (a column gone, a row shorter). */
  UNKNOWN_SCHEMA("unknown-schema", Next.FULL_READ),
  /** A value the change does not carry (unchanged TOAST, a key-only old image, binary). */
  INCOMPLETE_TUPLE("incomplete-tuple", Next.FULL_READ),
  NULL_KEY("null-key", Next.FULL_READ),
  /** More affected keys than {@code weir.continuous.affected-key-limit}. */
  BUDGET_EXCEEDED("budget-exceeded", Next.FULL_READ),
  DELTA_OUTSIDE_AFFECTED("delta-outside-affected", Next.FULL_READ),
  DUPLICATE_KEY("duplicate-key", Next.FULL_READ),
  ORDER_NOT_COMPARABLE("order-not-comparable", Next.FULL_READ),
  VISIBLE_ROW_LEFT("visible-row-left", Next.FULL_READ),
  RANK_BOUNDARY("rank-boundary", Next.FULL_READ),
  EVALUATOR_FAILED("evaluator-failed", Next.FULL_READ),
  EVALUATOR_MISSING("evaluator-missing", Next.FULL_READ),
  PROJECTOR_MISSING("projector-missing", Next.SCOPED_DELTA),
  PROJECTOR_UNCERTAIN("projector-uncertain", Next.SCOPED_DELTA),
  PROJECTOR_INCOMPLETE_TUPLE("projector-incomplete-tuple", Next.SCOPED_DELTA),
  PROJECTOR_KEY_TYPE("projector-key-type", Next.SCOPED_DELTA),
  /**
   * A read's snapshot held transactions no label can name: one not yet delivered that a scoped
   * delta did not read the keys of, or one committed after another the snapshot lacks (ADR 0042).
   */
  UNLABELLED_READ("unlabelled-read", Next.FULL_READ);

  /** The tier that takes over. */
  public enum Next {
    SCOPED_DELTA,
    FULL_READ
  }

  private final String wireName;
  private final Next next;

  FallbackReason(String wireName, Next next) {
    this.wireName = wireName;
    this.next = next;
  }

  /** The name status, metrics and docs use. */
  public String wireName() {
    return wireName;
  }

  public Next next() {
    return next;
  }

  @Override
  public String toString() {
    return wireName;
  }
}
