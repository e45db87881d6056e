package io.weir.persistence;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;

/**
 * Watches the node's PostgreSQL. On first contact it migrates Weir's schema and loads the cluster
 * identity; afterwards it probes the journal table at {@code weir.postgres.probe-interval}. While
 * PostgreSQL is unreachable it retries with exponential backoff (min-backoff .. max-backoff),
 * forever: the node stays up and reports itself not ready. It logs one line per change of state,
 * never a value, and publishes the latest {@link StorageStatus} for readiness checks. A cluster
 * created with another partition count or shard layout than the node's refuses it ({@link
 * StorageStatus.Refused}): the monitor stops and tells its owner, which shuts the node down.
 *
 * <p>Commands: {@link GetStatus} replies with the current {@link StorageStatus}.
 */
public final class StorageMonitor extends AbstractBehavior<StorageMonitor.Command> {

  public sealed interface Command {}

  /** Replies with the current status. */
  public record GetStatus(ActorRef<StorageStatus> replyTo) implements Command {}

  private enum Probe implements Command {
    INSTANCE
  }

  private record ProbeDone(StorageStatus status) implements Command {}

  private final Database database;
  private final AtomicReference<StorageStatus> published;
  private final TimerScheduler<Command> timers;
  private final Executor blockingIo;
  private final int partitions;
  private final int shards;
  private final Consumer<StorageStatus.Refused> onRefused;
  private StorageStatus status;
  private Duration backoff;

  /**
   * The storage generation (ADR 0036): advanced when storage becomes ready after being unavailable
   * (or for the first time) and when its identity changes.
   */
  private long generation;

  /**
   * Whether storage was ready at least once since the node started (TLS failures before that are
   * fatal).
   */
  private boolean everReady;

  /**
   * @param partitions the node's configured partition count, checked against the cluster's
   * @param shards the node's shard layout ({@code weir.partitions.shards}; {@link
   *     ClusterIdentityStore#LEGACY_SHARDS} for Pekko's own), checked against the cluster's
   * @param onRefused called once (on the actor's thread) when the database refuses this node
   */
  public static Behavior<Command> create(
      Database database,
      AtomicReference<StorageStatus> published,
      int partitions,
      int shards,
      Consumer<StorageStatus.Refused> onRefused) {
    return Behaviors.setup(
        ctx ->
            Behaviors.withTimers(
                timers ->
                    new StorageMonitor(
                        ctx, timers, database, published, partitions, shards, onRefused)));
  }

  private StorageMonitor(
      ActorContext<Command> context,
      TimerScheduler<Command> timers,
      Database database,
      AtomicReference<StorageStatus> published,
      int partitions,
      int shards,
      Consumer<StorageStatus.Refused> onRefused) {
    super(context);
    this.partitions = partitions;
    this.shards = shards;
    this.onRefused = onRefused;
    this.database = database;
    this.published = published;
    this.timers = timers;
    this.blockingIo =
        context
            .getSystem()
            .dispatchers()
            .lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher"));
    this.status = new StorageStatus.Starting(Instant.now());
    this.backoff = database.settings().minBackoff();
    published.set(status);
    context.getSelf().tell(Probe.INSTANCE);
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessageEquals(Probe.INSTANCE, this::onProbe)
        .onMessage(ProbeDone.class, this::onProbeDone)
        .onMessage(GetStatus.class, this::onGetStatus)
        .build();
  }

  private Behavior<Command> onProbe() {
    StorageStatus.Ready known = status instanceof StorageStatus.Ready r ? r : null;
    getContext()
        .pipeToSelf(
            CompletableFuture.supplyAsync(
                () -> probe(database, known, partitions, shards, !everReady), blockingIo),
            (result, error) ->
                new ProbeDone(
                    error != null
                        ? new StorageStatus.Unavailable(Instant.now(), SafeErrors.describe(error))
                        : result));
    return this;
  }

  private Behavior<Command> onProbeDone(ProbeDone done) {
    StorageStatus next = done.status();
    if (next instanceof StorageStatus.Refused refused) {
      getContext().getLog().error("PostgreSQL refuses this node: {}", refused.reason());
      status = refused;
      published.set(status);
      onRefused.accept(refused);
      return this; // terminal: no more probes
    }
    everReady |= next instanceof StorageStatus.Ready;
    boolean changed = next.getClass() != status.getClass();
    if (next instanceof StorageStatus.Ready ready) {
      StorageSystem was = status instanceof StorageStatus.Ready r ? r.system() : null;
      if (changed) {
        generation++; // reached (again): partitions recover and check their marks
      } else if (was != null && ready.system() != null && !was.equals(ready.system())) {
        generation++;
        getContext()
            .getLog()
            .warn(
                "PostgreSQL's identity changed from {} to {} (a failover or a restore): every"
                    + " partition recovers from it again and checks what it acknowledged",
                was.describe(),
                ready.system().describe());
      }
      next = ready.withGeneration(generation);
    }
    if (changed) {
      if (next instanceof StorageStatus.Ready ready) {
        getContext()
            .getLog()
            .info(
                "PostgreSQL is reachable: schema {} at version {}, cluster id {}; commits are"
                    + " durable on {} copies{} ({})",
                database.settings().schema(),
                ready.schemaVersion(),
                ready.identity().clusterId(),
                ready.copies().copies(),
                ready.copies().known() ? "" : " (unknown)",
                ready.copies().detail());
      } else if (next instanceof StorageStatus.Unavailable down) {
        getContext()
            .getLog()
            .warn(
                "PostgreSQL is unavailable ({}); the node is not ready and retries with backoff up to {}",
                down.reason(),
                database.settings().maxBackoff().toSeconds() + "s");
      }
      status = next; // a repeated state keeps its original 'since'
    } else if (next instanceof StorageStatus.Ready ready
        && status instanceof StorageStatus.Ready was) {
      if (ready.copies().copies() != was.copies().copies()
          || ready.copies().known() != was.copies().known()) {
        getContext()
            .getLog()
            .info(
                "PostgreSQL commits are durable on {} copies{} ({})",
                ready.copies().copies(),
                ready.copies().known() ? "" : " (unknown)",
                ready.copies().detail());
      }
      status = ready;
    }
    published.set(status);
    Duration delay;
    if (status instanceof StorageStatus.Ready) {
      backoff = database.settings().minBackoff();
      delay = database.settings().probeInterval();
    } else {
      delay = backoff;
      Duration doubled = backoff.multipliedBy(2);
      backoff =
          doubled.compareTo(database.settings().maxBackoff()) > 0
              ? database.settings().maxBackoff()
              : doubled;
    }
    timers.startSingleTimer(Probe.INSTANCE, delay);
    return this;
  }

  private Behavior<Command> onGetStatus(GetStatus get) {
    get.replyTo().tell(status);
    return this;
  }

  /**
   * Runs on the blocking-IO dispatcher. Migrates and loads the identity until that has succeeded
   * once. A TLS failure that retrying cannot fix ({@link SafeErrors.TlsFailure#isConfiguration()}:
   * the server's certificate is not trusted or does not name the host, or the server offers no TLS)
   * before storage was ever ready ({@code firstContact}) refuses the node: the settings do not fit
   * this server. Later it only makes storage unavailable (e.g. a failover to a server whose
   * certificate is not trusted yet), and the node keeps retrying.
   */
  static StorageStatus probe(
      Database database,
      StorageStatus.Ready known,
      int partitions,
      int shards,
      boolean firstContact) {
    String schema = database.settings().schema();
    try {
      StorageStatus.Ready ready = known;
      if (ready == null) {
        String version = SchemaMigrator.migrate(database.dataSource(), schema);
        try (Connection c = database.connection()) {
          // A restore from a backup is fenced before anything reads the restored schema.
          RestoreFence.applyIfPending(c, schema);
          ready =
              new StorageStatus.Ready(
                  Instant.now(),
                  ClusterIdentityStore.loadOrCreate(c, schema, partitions, shards),
                  version);
        }
      }
      try (Connection c = database.connection();
          Statement s = c.createStatement()) {
        s.setQueryTimeout((int) Math.max(1, database.settings().connectTimeout().toSeconds()));
        s.execute("SELECT 1 FROM " + schema + ".event_journal LIMIT 1");
        ready = ready.withCopies(StorageCopies.read(c)).withSystem(StorageSystem.read(c));
      }
      return ready;
    } catch (ClusterIdentityStore.PartitionCountMismatch
        | ClusterIdentityStore.PartitionShardsMismatch e) {
      return new StorageStatus.Refused(Instant.now(), e.getMessage());
    } catch (Exception e) {
      SafeErrors.TlsFailure tls = SafeErrors.tlsFailure(e);
      if (tls != null && tls.isConfiguration() && firstContact) {
        return new StorageStatus.Refused(
            Instant.now(),
            "weir.postgres.tls: "
                + tls.description()
                + "; check weir.postgres.tls.mode and root-cert against the server's certificate and the host in weir.postgres.url");
      }
      if (tls != null) {
        return new StorageStatus.Unavailable(
            Instant.now(), "TLS: " + tls.description() + " (" + SafeErrors.describe(e) + ")");
      }
      return new StorageStatus.Unavailable(Instant.now(), SafeErrors.describe(e));
    }
  }
}
