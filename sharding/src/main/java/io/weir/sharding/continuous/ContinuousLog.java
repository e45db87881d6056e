package io.weir.sharding.continuous;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.continuous.ContinuousSession.AppendReply;
import io.weir.sharding.continuous.ContinuousSession.Command;
import io.weir.sharding.continuous.ContinuousSession.Entry;
import io.weir.sharding.continuous.ContinuousSession.LogState;
import io.weir.sharding.partition.JournalPruner;
import io.weir.sharding.partition.ServerOrigin;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ClusterShardingSettings;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityRef;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.stream.javadsl.Sink;

/**
 * The continuous sessions' replay logs on Cluster Sharding (entity {@code weir-continuous-session},
 * entity id = subscription id, hosted by nodes with the server role): appends and the log's state
 * go to the entity, reads go to the journal by persistence id and journal sequence numbers (any
 * node can read: entries are immutable once written), pruning deletes old journal rows with SQL.
 */
public final class ContinuousLog {
  private final ActorSystem<?> system;
  private final CurrentEventsByPersistenceIdQuery journal;
  private final JournalPruner pruner;
  private final Duration timeout;

  public ContinuousLog(
      ActorSystem<?> system,
      CurrentEventsByPersistenceIdQuery journal,
      JournalPruner pruner,
      Duration timeout) {
    this.system = system;
    this.journal = journal;
    this.pruner = pruner;
    this.timeout = timeout;
  }

  /** A log on the JDBC journal the entities write to. */
  public static ContinuousLog jdbc(ActorSystem<?> system, JournalPruner pruner, Duration timeout) {
    return new ContinuousLog(
        system,
        PersistenceQuery.get(system)
            .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier()),
        pruner,
        timeout);
  }

  /**
   * Registers the entity type on this node (hosting sessions if it has {@code role}); logs that
   * keep {@code retained} events snapshot every {@code min(1000, retained / 2)} events, so pruning
   * never passes the latest snapshot.
   */
  public static void init(ActorSystem<?> system, String role, int retained) {
    int snapshotEvery = Math.max(1, Math.min(ContinuousSession.SNAPSHOT_EVERY, retained / 2));
    ClusterSharding.get(system)
        .init(
            Entity.of(
                    ContinuousSession.TYPE_KEY,
                    ctx ->
                        ServerOrigin.guard(
                            ContinuousSession.create(ctx.getEntityId(), snapshotEvery),
                            Command.class,
                            role))
                .withRole(role)
                // Unlike partitions, a session that gets no append (an idle or deleted query)
                // leaves memory;
                // the next ask recovers it from its snapshot.
                .withSettings(
                    ClusterShardingSettings.fromConfig(
                        ConfigFactory.parseString(
                                "passivation { strategy = default-idle-strategy\n"
                                    + "default-idle-strategy.idle-entity.timeout = "
                                    + IDLE.toSeconds()
                                    + "s }")
                            .withFallback(
                                system.settings().config().getConfig("pekko.cluster.sharding")))));
  }

  /** A session entity with no message for this long is passivated. */
  static final Duration IDLE = Duration.ofMinutes(5);

  private EntityRef<Command> session(String id) {
    return ClusterSharding.get(system).entityRefFor(ContinuousSession.TYPE_KEY, id);
  }

  /** The log's last sequence and offset. */
  public CompletionStage<LogState> state(String id) {
    return session(id).ask(ContinuousSession.GetLog::new, timeout);
  }

  /** The materialised result the log describes (rows null when not known). */
  public CompletionStage<ContinuousSession.Result> result(String id) {
    return session(id).ask(ContinuousSession.GetResult::new, timeout);
  }

  /** Appends {@code entries} (contiguous); a lost reply may be retried with the same entries. */
  public CompletionStage<AppendReply> append(String id, List<Entry> entries) {
    return session(id).ask(replyTo -> new ContinuousSession.Append(entries, replyTo), timeout);
  }

  /**
   * Up to {@code max} entries after sequence {@code after}, in order, for a log with {@code offset}
   * ({@link LogState#offset()}): the first ones the journal holds there. Pruned entries are simply
   * not there, so the list then starts later than {@code after + 1} (or is empty only when nothing
   * follows {@code after} at all). Fails after the ask timeout.
   */
  public CompletionStage<List<Entry>> after(String id, long offset, long after, int max) {
    long from = Math.max(1, after + 1 - offset);
    if (max <= 0) {
      return CompletableFuture.completedFuture(List.of());
    }
    return journal
        .currentEventsByPersistenceId(
            ContinuousSession.persistenceId(id).id(), from, Long.MAX_VALUE)
        .filter(envelope -> envelope.event() instanceof Entry e && e.sequence() > after)
        .take(max)
        .runWith(
            Sink.fold(
                new ArrayList<Entry>(),
                (acc, envelope) -> {
                  acc.add((Entry) envelope.event());
                  return acc;
                }),
            system)
        .toCompletableFuture()
        .orTimeout(timeout.toMillis(), TimeUnit.MILLISECONDS)
        .thenApply(List::copyOf);
  }

  /**
   * Cuts a deleted registration's log to its last entry {@code last}: the rows before it and every
   * snapshot (they hold the result's values) are deleted.
   */
  public CompletionStage<Integer> cut(String id, long offset, long last) {
    String pid = ContinuousSession.persistenceId(id).id();
    return prune(id, offset, last - 1, last)
        .thenCompose(
            rows ->
                pruner.deleteSnapshotsBefore(pid, last - offset + 1).thenApply(snapshots -> rows));
  }

  /**
   * Deletes the entries through sequence {@code through} (never the last one: an empty journal
   * would let the log start again at 1).
   */
  public CompletionStage<Integer> prune(String id, long offset, long through, long last) {
    long upTo = Math.min(through, last - 1) - offset;
    if (upTo < 1) {
      return CompletableFuture.completedFuture(0);
    }
    return pruner.deleteThrough(ContinuousSession.persistenceId(id).id(), upTo);
  }
}
