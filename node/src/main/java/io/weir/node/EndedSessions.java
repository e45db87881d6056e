package io.weir.node;

import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Which cluster members provably lost their process: this node saw the member's PostgreSQL session
 * (named {@code weir-member <unique id>}), the session has since ended while PostgreSQL itself kept
 * running, it stayed ended for at least {@code minAbsence}, and the member is unreachable. Such a
 * member is downed at once instead of after the split-brain resolver's {@code stable-after} (ADR
 * 0051). A member that is only slow or frozen keeps its session (its TCP connection stays open), so
 * it is never chosen here.
 *
 * <p>Not thread-safe: {@link MemberPresence} calls it from one scheduled task at a time. Times are
 * {@link System#nanoTime()} readings.
 */
final class EndedSessions {
  private final long minAbsenceNanos;

  /** Members whose session this node has seen during the current PostgreSQL lifetime. */
  private final Set<Long> seen = new HashSet<>();

  /** Seen members whose session is gone: when this node first saw it gone. */
  private final Map<Long, Long> goneSince = new HashMap<>();

  private Instant postmasterStart;

  EndedSessions(Duration minAbsence) {
    this.minAbsenceNanos = minAbsence.toNanos();
  }

  /**
   * One look at PostgreSQL's sessions: the server's start time and the unique ids of the members
   * with a session now. A new start time (PostgreSQL restarted, or a standby was promoted) ends
   * every session without saying anything about the members, so what was seen before is dropped.
   */
  void observe(long now, Instant postmasterStarted, Set<Long> withSession) {
    if (!Objects.equals(postmasterStarted, postmasterStart)) {
      postmasterStart = postmasterStarted;
      seen.clear();
      goneSince.clear();
    }
    seen.addAll(withSession);
    for (Long member : seen) {
      if (withSession.contains(member)) {
        goneSince.remove(member);
      } else {
        goneSince.putIfAbsent(member, now);
      }
    }
  }

  /**
   * The members to down now: among {@code unreachable}, those whose session has been gone for at
   * least the minimum absence. None unless this node's side holds a majority of the members: a
   * minority never downs anyone on its own (the resolver decides there).
   */
  Set<Long> toDown(long now, Set<Long> unreachable, boolean majority) {
    Set<Long> out = new HashSet<>();
    if (!majority) {
      return out;
    }
    for (Long member : unreachable) {
      Long since = goneSince.get(member);
      if (since != null && now - since >= minAbsenceNanos) {
        out.add(member);
      }
    }
    return out;
  }

  /** Forgets members that are no longer in the cluster, so the sets stay as small as it is. */
  void retain(Set<Long> members) {
    seen.retainAll(members);
    goneSince.keySet().retainAll(members);
  }

  /**
   * Whether {@code reachable} members (this node included) are more than half of {@code all}: the
   * side that keeps the cluster under keep-majority (a tie is never a majority here).
   */
  static boolean majority(int reachable, int all) {
    return all > 0 && 2 * reachable > all;
  }

  /** The unique id in a session's application name, or null when it is not a member's. */
  static Long memberOf(String applicationName) {
    if (applicationName == null || !applicationName.startsWith(MemberPresence.NAME_PREFIX)) {
      return null;
    }
    String digits = applicationName.substring(MemberPresence.NAME_PREFIX.length());
    if (digits.isEmpty() || digits.length() > 20 || !digits.chars().allMatch(Character::isDigit)) {
      return null;
    }
    try {
      return Long.parseUnsignedLong(digits);
    } catch (NumberFormatException e) {
      return null;
    }
  }
}
