package io.weir.node;

import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Which cluster members provably lost their process (ADR 0051). A member is chosen when, at a look
 * by this node:
 *
 * <ul>
 *   <li>this node saw the member's PostgreSQL session ({@code weir-member <unique id>}) no longer
 *       than {@code window} before the first look that found the member unreachable, and found the
 *       session gone at least {@code lead} before that look: the session ended first, as when the
 *       process dies (its connection closes at once, the failure detector needs seconds). A session
 *       ended about when or after the member became unreachable (a frozen member whose connection
 *       was ended by someone else) or long before it (a member running without a session) is no
 *       evidence;
 *   <li>the session is still gone and the member has been unreachable for {@code minUnreachable},
 *       in every look since;
 *   <li>the member was never reachable again since its session ended (a dead process never is);
 *   <li>this node's side held a majority at this look and at the one before.
 * </ul>
 *
 * <p>What was seen is forgotten when PostgreSQL's start time changes or when this node had to open
 * its own session again ({@link #reset}): either means sessions may have ended for reasons that say
 * nothing about the members. A member that is only slow or frozen keeps its session, so it is never
 * chosen here; the split-brain resolver decides about it after {@code stable-after}.
 *
 * <p>Not thread-safe: {@link MemberPresence} calls it from its one thread. Times are {@link
 * System#nanoTime()} readings taken when a look's answer arrived.
 */
final class EndedSessions {
  private final long minUnreachableNanos;
  private final long windowNanos;
  private final long leadNanos;

  /** Members whose session this node has seen, and when it last saw it. */
  private final Map<Long, Long> lastPresent = new HashMap<>();

  /** Seen members whose session is gone: the first look that found it gone. */
  private final Map<Long, Long> goneSince = new HashMap<>();

  /** Unreachable members: the first look that found them so (continuously since). */
  private final Map<Long, Long> unreachableSince = new HashMap<>();

  /** Unreachable members whose session was already gone, recently, when they became so. */
  private final Set<Long> goneFirst = new HashSet<>();

  /** Members seen reachable again after their session ended: alive without a session. */
  private final Set<Long> aliveWithout = new HashSet<>();

  private Instant postmasterStart;
  private boolean majorityBefore;

  EndedSessions(Duration minUnreachable, Duration window, Duration lead) {
    this.minUnreachableNanos = minUnreachable.toNanos();
    this.windowNanos = window.toNanos();
    this.leadNanos = lead.toNanos();
  }

  /** Forgets every session seen: this node's own session had to be opened again. */
  void reset() {
    lastPresent.clear();
    goneSince.clear();
    unreachableSince.clear();
    goneFirst.clear();
    aliveWithout.clear();
    majorityBefore = false;
  }

  /**
   * One look: PostgreSQL's start time, the unique ids of the members with a session now, the
   * unreachable members and whether this node's side holds a majority (and this node is Up), all as
   * they were when the look's answer arrived at {@code now}. Returns the members to down now.
   */
  Set<Long> look(
      long now,
      Instant postmasterStarted,
      Set<Long> withSession,
      Set<Long> unreachable,
      boolean majority) {
    if (!Objects.equals(postmasterStarted, postmasterStart)) {
      reset();
      postmasterStart = postmasterStarted;
    }
    for (Long member : withSession) {
      lastPresent.put(member, now);
      goneSince.remove(member);
      aliveWithout.remove(member);
    }
    for (Long member : lastPresent.keySet()) {
      if (!withSession.contains(member)) {
        goneSince.putIfAbsent(member, now);
      }
    }
    for (Long member : unreachableSince.keySet()) {
      if (!unreachable.contains(member) && goneSince.containsKey(member)) {
        aliveWithout.add(member); // reachable again without its session: not a dead process
      }
    }
    unreachableSince.keySet().retainAll(unreachable);
    goneFirst.retainAll(unreachable);
    for (Long member : unreachable) {
      if (unreachableSince.putIfAbsent(member, now) == null) {
        Long present = lastPresent.get(member);
        Long gone = goneSince.get(member);
        if (gone != null
            && now - gone >= leadNanos
            && present != null
            && now - present <= windowNanos) {
          goneFirst.add(member);
        }
      }
    }
    Set<Long> out = new HashSet<>();
    if (majority && majorityBefore) {
      for (Long member : unreachable) {
        if (goneFirst.contains(member)
            && goneSince.containsKey(member)
            && !aliveWithout.contains(member)
            && now - unreachableSince.get(member) >= minUnreachableNanos) {
          out.add(member);
        }
      }
    }
    majorityBefore = majority;
    return out;
  }

  /** Forgets members that are no longer in the cluster, so the sets stay as small as it is. */
  void retain(Set<Long> members) {
    lastPresent.keySet().retainAll(members);
    goneSince.keySet().retainAll(members);
    unreachableSince.keySet().retainAll(members);
    goneFirst.retainAll(members);
    aliveWithout.retainAll(members);
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
