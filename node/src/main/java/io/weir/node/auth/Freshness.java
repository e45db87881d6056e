package io.weir.node.auth;

import java.time.Duration;

/**
 * How stale this node's view of the principals may be when it answers a request ({@code
 * weir.principals.max-staleness}, {@code weir.principals.check-timeout}).
 *
 * <p>A request is answered from the view only if a check that began at most {@code maxStaleness}
 * before the request began confirmed that the view holds what PostgreSQL holds (or reloaded it).
 * Otherwise the request waits for a check (one at a time per node, shared by every request
 * waiting), at most {@code checkTimeout}; a check that does not succeed in time fails the request
 * (503, retryable), it is never answered from the older view.
 *
 * @param maxStaleness above zero, at most {@link #MAX_STALENESS}
 * @param checkTimeout how long a request waits for a check at most; above zero, at most {@link
 *     #MAX_CHECK_TIMEOUT}
 */
public record Freshness(Duration maxStaleness, Duration checkTimeout) {
  /** The bound unless configured otherwise. */
  public static final Duration DEFAULT_MAX_STALENESS = Duration.ofSeconds(1);

  /**
   * The largest bound a node accepts: a longer one is refused at start-up (the bound would stop
   * meaning "about a second").
   */
  public static final Duration MAX_STALENESS = Duration.ofSeconds(5);

  /** How long a request waits for a check unless configured otherwise. */
  public static final Duration DEFAULT_CHECK_TIMEOUT = Duration.ofSeconds(2);

  /** The longest a request may be made to wait for a check. */
  public static final Duration MAX_CHECK_TIMEOUT = Duration.ofSeconds(30);

  /** The defaults: a bound of 1 s, checks waited for 2 s at most. */
  public static final Freshness DEFAULT =
      new Freshness(DEFAULT_MAX_STALENESS, DEFAULT_CHECK_TIMEOUT);

  public Freshness {
    if (maxStaleness.isNegative()
        || maxStaleness.isZero()
        || maxStaleness.compareTo(MAX_STALENESS) > 0) {
      throw new IllegalArgumentException(
          "the principals' staleness bound must be above 0 and at most "
              + MAX_STALENESS.toSeconds()
              + "s");
    }
    if (checkTimeout.isNegative()
        || checkTimeout.isZero()
        || checkTimeout.compareTo(MAX_CHECK_TIMEOUT) > 0) {
      throw new IllegalArgumentException(
          "the principals' check timeout must be above 0 and at most "
              + MAX_CHECK_TIMEOUT.toSeconds()
              + "s");
    }
  }
}
