package io.weir.sharding.partition;

import io.weir.persistence.SafeErrors;
import io.weir.sharding.partition.ConsumerProtocol.CommitBatch;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ReleaseConsumer;
import io.weir.sharding.partition.Partition.BodiesFetched;
import io.weir.sharding.partition.Partition.Continue;
import io.weir.sharding.partition.Partition.Event;
import io.weir.sharding.partition.Partition.MarkRaised;
import io.weir.sharding.partition.Partition.Purged;
import io.weir.sharding.partition.Partition.RecoveryMarked;
import io.weir.sharding.partition.Partition.StorageChecked;
import io.weir.sharding.partition.Partition.StorageLossMarked;
import io.weir.sharding.partition.Partition.TableApplied;
import io.weir.sharding.partition.Partition.TableReady;
import io.weir.sharding.partition.Partition.WriteBatch;
import io.weir.sharding.partition.Partition.Written;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Write;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.persistence.typed.RecoveryCompleted;
import org.apache.pekko.persistence.typed.SnapshotAdapter;
import org.apache.pekko.persistence.typed.SnapshotCompleted;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.Effect;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.apache.pekko.persistence.typed.javadsl.Recovery;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.apache.pekko.persistence.typed.javadsl.SignalHandler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The partition's event-sourced behavior: its command, event and signal handlers, recovery and the
 * storage check that follows it, the group commit of writes and the snapshot policy. The types it
 * persists and answers with are {@link Partition}'s; see there for what a partition is.
 */
final class PartitionBehavior
    extends EventSourcedBehavior<Command, Partition.Event, PartitionState> {
  private static final Logger log = LoggerFactory.getLogger(Partition.class);

  /** Rounds of fetching before images one batch may take before the partition restarts. */
  static final int MAX_FETCH_ROUNDS = 3;

  private final int partition;
  private final PartitionWiring wiring;
  private final ActorRef<Command> self;
  private final TableWriter table;
  private final PartitionReads reads;
  private final Unapplied unapplied = new Unapplied();
  private final BodyCache cache;
  private final PartitionMarks marks;
  private final BeforeImages images;

  /** The keys the receipts table may hold (ADR 0057). */
  private final ReceiptFilter receiptFilter;

  /** How {@link #receiptFilter} learns the receipts written before this start. */
  private final ReceiptFilterStart receiptFilterStart;

  private final OutboxRetention retention;

  /** When this incarnation of the partition started: recovery time is measured from here. */
  private final long createdNanos;

  /**
   * The state read with the wiring's {@link StateStore}, Pekko's replay disabled; null when Pekko
   * replays the journal.
   */
  private final StateStore.Recovered recovered;

  private final ActorContext<Command> ctx;

  /**
   * Whether the documents table holds every recovered event and the storage check is over: reads
   * and writes may go.
   */
  private boolean ready;

  /** Whether the documents table holds every recovered event. */
  private boolean tableReady;

  /**
   * Partition {@code partition}: recovered by Pekko's replay when {@code recovered} is null, else
   * starting from that state (read since {@code createdNanos}).
   */
  PartitionBehavior(
      int partition,
      PartitionWiring wiring,
      ActorContext<Command> ctx,
      StateStore.Recovered recovered,
      long createdNanos) {
    super(Partition.persistenceId(partition));
    this.partition = partition;
    this.wiring = wiring;
    this.ctx = ctx;
    this.recovered = recovered;
    this.createdNanos = createdNanos;
    this.self = ctx.getSelf();
    this.marks = new PartitionMarks(partition, wiring, self);
    this.retention = new OutboxRetention(wiring.pruner(), persistenceId().id(), partition);
    this.cache = new BodyCache(wiring.settings().bodyCacheBytes());
    this.receiptFilter = new ReceiptFilter(wiring.settings().receiptTtlMillis());
    this.receiptFilterStart =
        new ReceiptFilterStart(
            partition, receiptFilter, wiring.table(), wiring.settings().receiptTtlMillis(), ctx);
    this.images = new BeforeImages(unapplied, cache, receiptFilter);
    CurrentEventsByPersistenceIdQuery journal =
        wiring.queryJournal() == null
            ? null
            : PersistenceQuery.get(ctx.getSystem())
                .getReadJournalFor(CurrentEventsByPersistenceIdQuery.class, wiring.queryJournal());
    this.table =
        new TableWriter(
            partition,
            wiring.table(),
            journal,
            ctx.getSystem(),
            through -> self.tell(new TableApplied(through)),
            () -> self.tell(TableReady.INSTANCE),
            writer -> self.tell(new Partition.TableFenced(writer)),
            () -> self.tell(Partition.TableFailing.INSTANCE),
            wiring.observer(),
            wiring.settings().receiptTtlMillis());
    TableWriter writer = this.table;
    this.reads = new PartitionReads(partition, wiring.table(), writer::verify);
  }

  @Override
  public PartitionState emptyState() {
    return recovered != null ? recovered.state() : emptyState(wiring.settings());
  }

  /** A partition's state before its first event. */
  static PartitionState emptyState(PartitionSettings settings) {
    PartitionState s = PartitionState.empty();
    s.receiptPolicy = settings.receiptPolicy();
    return s;
  }

  /** A state read from a snapshot, ready to take events. */
  static PartitionState fromSnapshot(PartitionState s, PartitionSettings settings) {
    s.receiptPolicy = settings.receiptPolicy();
    return s;
  }

  /** Nothing for Pekko to replay when the state was read already (ADR 0054). */
  @Override
  public Recovery recovery() {
    return recovered != null ? Recovery.disabled() : super.recovery();
  }

  /**
   * The state is changed in place by the event handler, while the snapshot store serializes a
   * snapshot asynchronously: it gets a copy, taken on the entity's thread when the snapshot is
   * triggered.
   */
  @Override
  public SnapshotAdapter<PartitionState> snapshotAdapter() {
    return new SnapshotAdapter<>() {
      @Override
      public Object toJournal(PartitionState state) {
        return state.copy();
      }

      @Override
      public PartitionState fromJournal(Object from) {
        return fromSnapshot((PartitionState) from, wiring.settings());
      }
    };
  }

  /**
   * No count-based snapshots and no snapshot deletion by the plugin: {@link #shouldSnapshot}
   * decides when, and {@link OutboxRetention} deletes snapshots older than the two latest.
   */
  @Override
  public RetentionCriteria retentionCriteria() {
    return RetentionCriteria.disabled();
  }

  /**
   * As the settings' {@link SnapshotPolicy} says, when Pekko's snapshot store keeps the snapshots;
   * never when the wiring's {@link StateStore} does ({@link #snapshotIfDue}).
   */
  @Override
  public boolean shouldSnapshot(PartitionState state, Event event, long sequenceNr) {
    return !wiring.stateStore().writesSnapshots()
        && wiring
            .settings()
            .snapshots()
            .due(state.mark, sequenceNr, state.eventBytes, state.snapshotEstimate());
  }

  /** Whether a snapshot this partition took is being saved by the state store. */
  private boolean snapshotting;

  /**
   * The journal's writer of an event this actor persisted (Pekko's writer id, new at every start of
   * the behavior), read when its first snapshot is due, right after that event; null before. Every
   * snapshot is saved only over an event of this writer: a save held back past an accepted storage
   * loss (ADR 0036) then finds another start's event at its sequence and writes nothing (ADR 0055).
   * Pekko makes the writer id inside its restart supervision: this behavior has none (a failure
   * stops the partition and the next start builds a new object); one added would need this read
   * again after each restart.
   */
  private CompletableFuture<String> writer;

  /**
   * This start's journal writer ({@link #writer}), read now from the row of the event just
   * persisted ({@code s.events}) unless read before; read again if that read failed, found no row,
   * or the storage changed ({@link StorageGate#generation}) while it ran.
   */
  private CompletableFuture<String> writer(PartitionState s) {
    if (writer == null
        || (writer.isDone()
            && (writer.isCompletedExceptionally() || writer.getNow(null) == null))) {
      StorageGate gate = wiring.gate();
      long generation = gate.generation();
      writer =
          wiring
              .stateStore()
              .journalWriter(partition, s.events)
              .toCompletableFuture()
              .thenApply(w -> gate.generation() == generation ? w : null);
    }
    return writer;
  }

  /**
   * After an event: saves a snapshot in the background through the wiring's {@link StateStore} if
   * the policy says one is due (ADR 0055). Unlike Pekko's snapshots, no write or reply waits for
   * it; one is saved at a time, and while it is, the policy is not asked (so its mark stays where
   * the saved one put it) until it is saved.
   */
  private void snapshotIfDue(PartitionState s) {
    if (snapshotting
        || !wiring.stateStore().writesSnapshots()
        || !wiring
            .settings()
            .snapshots()
            .due(s.mark, s.events, s.eventBytes, s.snapshotEstimate())) {
      return;
    }
    snapshotting = true;
    long sequence = s.events;
    PartitionState copy = s.copy();
    StateStore store = wiring.stateStore();
    writer(s)
        .thenCompose(
            w ->
                w == null
                    ? CompletableFuture.completedFuture(false)
                    : store.saveSnapshot(partition, sequence, w, copy))
        .whenComplete(
            (saved, error) ->
                self.tell(
                    new Partition.SnapshotSaved(
                        sequence,
                        saved != null && saved,
                        error == null ? null : SafeErrors.describe(error))));
  }

  private Effect<Event, PartitionState> snapshotSaved(
      PartitionState state, Partition.SnapshotSaved c) {
    snapshotting = false;
    if (c.saved()) {
      retention.snapshotCompleted(c.sequence(), state, table.appliedThrough());
      // One that fell due while this one was saved is taken now, not at the next event: a partition
      // that went quiet meanwhile would otherwise keep that tail to replay.
      snapshotIfDue(state);
    } else {
      // Like a failed Pekko snapshot: the partition goes on; recovery reads the one before.
      log.warn(
          "partition {}: its snapshot at journal sequence {} was not saved ({}); the next is due"
              + " after the policy's events",
          partition,
          c.sequence(),
          c.failure() != null
              ? c.failure()
              : "the journal does not hold that event from this start of the partition");
    }
    return Effect().none();
  }

  /**
   * Whether the journal's highest sequence number refuted the state read by the wiring's recovery:
   * then the partition stops at its next message, serving nothing.
   */
  private boolean refuted;

  @Override
  public CommandHandler<Command, Event, PartitionState> commandHandler() {
    var handlers = newCommandHandlerBuilder();
    handlers.forState(state -> refuted).onAnyCommand(c -> Effect().stop());
    handlers
        .forAnyState()
        .onCommand(WriteBatch.class, (state, c) -> write(state, c.writes(), c.done()))
        .onCommand(ApplyFrame.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(LoadRows.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(
            PartitionProtocol.ApplyFrames.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(ConfigureConsumer.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(ReleaseConsumer.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(CommitBatch.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(PartitionProtocol.SetRowRule.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(BodiesFetched.class, this::bodiesFetched)
        .onCommand(
            Partition.ReceiptsLoaded.class,
            (state, c) -> {
              receiptFilterStart.loaded(c);
              return Effect().none();
            })
        .onCommand(
            Partition.LoadReceipts.class,
            (state, c) -> {
              receiptFilterStart.load(c.attempt());
              return Effect().none();
            })
        .onCommand(Partition.SnapshotSaved.class, this::snapshotSaved)
        .onCommand(Continue.class, (state, c) -> proceed(state))
        .onCommand(TableApplied.class, (state, c) -> tableApplied(c.through()))
        // An apply failed: the writes waiting for the table are refused if it is at its bound.
        .onCommand(Partition.TableFailing.class, (state, c) -> Effect().unstashAll())
        .onCommand(
            TableReady.class,
            (state, c) -> {
              tableReady = true;
              unapplied.caughtUp(table.appliedThrough());
              return becomeReady(state);
            })
        .onCommand(
            Partition.TableFenced.class,
            (state, c) -> {
              if (c.writer() != table.id()) {
                return Effect().none();
              }
              log.warn(
                  "partition {}: its documents table writer was refused; recovering again",
                  partition);
              return Effect().stop();
            })
        .onCommand(StorageChecked.class, this::storageChecked)
        .onCommand(RecoveryMarked.class, this::recoveryMarked)
        .onCommand(MarkRaised.class, this::markRaised)
        .onCommand(StatusProtocol.AcceptStorageLoss.class, this::acceptStorageLoss)
        .onCommand(StorageLossMarked.class, this::storageLossMarked)
        .onCommand(GetStatus.class, (state, c) -> Effect().reply(c.replyTo(), status(state)))
        .onCommand(
            GetDocument.class, (state, c) -> read(() -> reads.document(state, unapplied, cache, c)))
        .onCommand(
            ReadProtocol.GetDocuments.class, (state, c) -> read(() -> reads.page(unapplied, c)))
        .onCommand(
            ReadProtocol.GetAcls.class,
            (state, c) -> read(() -> reads.acls(state, unapplied, cache, c, self::tell)))
        .onCommand(
            Partition.AclsRead.class,
            (state, c) -> {
              reads.learned(state, c);
              return Effect().none();
            })
        .onCommand(
            ReadProtocol.ScanCollection.class,
            (state, c) -> read(() -> reads.scan(state, unapplied, c, () -> self.tell(c))))
        .onCommand(
            ReadProtocol.ReadChanges.class,
            (state, c) -> Effect().reply(c.replyTo(), PartitionReads.changes(state, c)))
        .onCommand(
            ConsumerProtocol.ReadConsumer.class,
            (state, c) -> Effect().reply(c.replyTo(), PartitionReads.span(state, c)))
        .onCommand(PartitionProtocol.PurgeOutbox.class, this::purge)
        .onCommand(
            PartitionProtocol.PurgeConsumed.class,
            (state, c) -> {
              long through = state.lowestCheckpoint().orElse(state.outboxFirst - 1);
              return purge(
                  state, new PartitionProtocol.PurgeOutbox(through, c.maxEntries(), c.replyTo()));
            });
    // The builder's build, not the last state builder's: that would drop the refuted handler.
    return handlers.build();
  }

  private Effect<Event, PartitionState> storageChecked(PartitionState state, StorageChecked c) {
    if (c.failure() != null) {
      // Fail closed: without the mark the journal cannot be shown to hold what was acknowledged.
      log.warn(
          "partition {}: the storage check after recovery failed ({}); recovering again",
          partition,
          c.failure());
      return Effect().stop();
    }
    return marks.checked(state, c.mark()) ? becomeReady(state) : Effect().none();
  }

  private Effect<Event, PartitionState> recoveryMarked(PartitionState state, RecoveryMarked c) {
    if (c.failure() != null) {
      log.warn(
          "partition {}: the mark over its recovered journal could not be raised ({}); recovering"
              + " again",
          partition,
          c.failure());
      return Effect().stop();
    }
    marks.recoveryMarked(c.mark());
    return becomeReady(state);
  }

  /** Serves once both the documents table and the storage check are done. */
  private Effect<Event, PartitionState> becomeReady(PartitionState state) {
    if (ready || !tableReady || marks.check() == PartitionMarks.StorageCheck.CHECKING) {
      return Effect().none();
    }
    ready = true;
    wiring.observer().recovered(partition, System.nanoTime() - createdNanos);
    receiptFilterStart.start(state);
    return Effect().unstashAll();
  }

  private Effect<Event, PartitionState> markRaised(PartitionState state, MarkRaised c) {
    if (c.failure() != null) {
      // The commit is in the journal but cannot be shown to be marked: answer nothing, recover.
      log.error(
          "partition {}: the acknowledged mark could not be raised ({}); restarting the partition"
              + " without answering its writes",
          partition,
          c.failure());
      return Effect().stop();
    }
    wiring.observer().markRaised(partition, System.nanoTime() - c.startedNanos());
    Runnable advance = run == null ? null : run.afterMark;
    if (advance == null) {
      return Effect().none();
    }
    run.afterMark = null;
    advance.run();
    return run == null ? Effect().unstashAll() : Effect().none();
  }

  /**
   * An operator accepts that the storage lost what this partition acknowledged: a new incarnation
   * starts at the journal's tail, in a new epoch of the mark (ADR 0036).
   */
  private Effect<Event, PartitionState> acceptStorageLoss(
      PartitionState state, StatusProtocol.AcceptStorageLoss c) {
    if (!ready || run != null) {
      return Effect().stash();
    }
    if (marks.check() != PartitionMarks.StorageCheck.BEHIND) {
      return Effect()
          .reply(
              c.replyTo(),
              new StatusProtocol.StorageLossRefused(
                  "the partition is "
                      + marks.check().wireName
                      + ", not storage-behind: its journal holds everything it acknowledged"));
    }
    long lost = marks.lostBy(state);
    Written fresh = new Written(UUID.randomUUID().toString(), List.of());
    long bytesBefore = state.eventBytes;
    Map<String, String> rulesBefore = state.ruleFields();
    return Effect()
        .persist(fresh)
        .thenRun(
            s -> {
              persisted(s, fresh, rulesBefore, bytesBefore, List.of());
              snapshotIfDue(s);
              marks.raiseNewIncarnation(s, lost, c.replyTo());
            });
  }

  private Effect<Event, PartitionState> storageLossMarked(
      PartitionState state, StorageLossMarked c) {
    marks.lossAccepted(c.mark());
    log.warn(
        "partition {}: an operator accepted the storage's loss of {} acknowledged journal events;"
            + " a new incarnation starts at sequence {}",
        partition,
        c.lost(),
        state.events);
    c.replyTo()
        .tell(new StatusProtocol.StorageLossAccepted(c.mark().epoch(), state.events, c.lost()));
    return Effect().unstashAll();
  }

  /** A read of documents: served once the documents table holds every recovered event. */
  private Effect<Event, PartitionState> read(Runnable serve) {
    if (!ready) {
      return Effect().stash();
    }
    serve.run();
    return Effect().none();
  }

  private StatusProtocol.PartitionStatus status(PartitionState s) {
    return PartitionReads.status(partition, s, table.status(), marks.view(s));
  }

  /**
   * The table applied the events through {@code through}: their documents leave the unapplied
   * changes for the cache, and writes that waited for the table's lag may go.
   */
  private Effect<Event, PartitionState> tableApplied(long through) {
    unapplied.applied(through, (key, p) -> cache.put(key, p.seq(), p.document()));
    if (run != null && !run.fetching && run.afterMark == null && !table.behind()) {
      self.tell(Continue.INSTANCE); // a run's next event may have waited for the table
    }
    return Effect().unstashAll();
  }

  private Effect<Event, PartitionState> purge(PartitionState s, PartitionProtocol.PurgeOutbox c) {
    OutboxRetention.Purge decided = OutboxRetention.decide(s, c);
    if (decided.reply() != null) {
      return Effect().reply(c.replyTo(), decided.reply());
    }
    long first = s.outboxFirst;
    long target = decided.target();
    boolean more = decided.more();
    boolean pinned = decided.pinned();
    Purged purged = new Purged(target);
    return Effect()
        .persist(purged)
        .thenRun(
            after -> {
              table.persisted(after.events, purged, 0, List.of());
              snapshotIfDue(after);
              reportOutbox(after);
              c.replyTo()
                  .tell(
                      new PartitionProtocol.OutboxPurged(
                          after.outboxFirst, after.nextSequence, target - first + 1, more, pinned));
              retention.prune(after, table.appliedThrough());
            });
  }

  @Override
  public SignalHandler<PartitionState> signalHandler() {
    return newSignalHandlerBuilder()
        .onSignal(
            RecoveryCompleted.instance(),
            state -> {
              long journalEnd = lastSequenceNumber(ctx);
              if (recovered != null && journalEnd != state.events) {
                // The journal holds more (or less) than was read: the state cannot be shown to be
                // the journal's. Stop before serving; this node replays it with Pekko from now on.
                log.error(
                    "partition {}: the journal ends at sequence {}, but its recovery read through"
                        + " {}; recovering with Pekko's replay instead",
                    partition,
                    journalEnd,
                    state.events);
                wiring.stateStore().refuted(partition);
                refuted = true;
                self.tell(Partition.Refuted.INSTANCE);
                return;
              }
              table.start(state.events, state.nextSequence);
              reportOutbox(state);
              marks.checkStorage();
            })
        .onSignal(
            PostStop.instance(),
            state -> {
              table.stop();
              receiptFilterStart.stop();
            })
        .onSignal(
            org.apache.pekko.actor.typed.PreRestart.instance(),
            state -> {
              table.stop();
              receiptFilterStart.stop();
            })
        .onSignal(
            SnapshotCompleted.class,
            (state, completed) -> {
              retention.snapshotCompleted(
                  completed.metadata().sequenceNr(), state, table.appliedThrough());
            })
        .build();
  }

  /** The group commit being written, or null: while there is one, other writes wait. */
  private GroupCommit run;

  private Effect<Event, PartitionState> write(
      PartitionState state, List<Write> requested, ActorRef<PartitionEntity.BatchWritten> done) {
    PartitionProtocol.TableApplyFailed failing = table.refusing();
    if (failing != null && requested.stream().anyMatch(WriteReplies::answerable)) {
      // The table is as far behind as it may be (or cannot be caught up at a start) and applying
      // to it fails: waiting would last as long as the failure, so the writes are refused (their
      // senders retry). Row-rule changes have no refusal: they go on as a batch of their own,
      // which waits for the table.
      List<Write> rules =
          WriteReplies.refuseTableFailed(requested, failing.lagEvents(), failing.failures());
      if (!rules.isEmpty()) {
        self.tell(new Partition.WriteBatch(rules, null));
      }
      if (done != null) {
        done.tell(PartitionEntity.BatchWritten.INSTANCE);
      }
      return Effect().none();
    }
    if (!ready || run != null || table.behind()) {
      // Not recovered into the table yet, another group commit is being written, or the table is
      // too far behind: the write waits.
      return Effect().stash();
    }
    if (marks.check() == PartitionMarks.StorageCheck.BEHIND) {
      refuseBehind(state, requested);
      if (done != null) {
        done.tell(PartitionEntity.BatchWritten.INSTANCE);
      }
      return Effect().none();
    }
    List<Write> writes = admitted(requested);
    if (writes.isEmpty()) {
      if (done != null) {
        done.tell(PartitionEntity.BatchWritten.INSTANCE);
      }
      return Effect().none();
    }
    run = new GroupCommit(writes, done);
    return step(state);
  }

  private Effect<Event, PartitionState> bodiesFetched(PartitionState state, BodiesFetched c) {
    if (run == null || !run.fetching) {
      return Effect().none();
    }
    run.fetching = false;
    if (c.failure() != null) {
      log.warn(
          "partition {}: reading before images from the documents table failed ({}); planning"
              + " the writes again",
          partition,
          c.failure());
    }
    images.fetched(c);
    return step(state);
  }

  /** Goes on with the run after an event that did not hold all of it. */
  private Effect<Event, PartitionState> proceed(PartitionState state) {
    if (run == null || run.fetching || run.afterMark != null) {
      // No run, or it waits for before images or for the mark of its last event (whose arrival
      // goes on with it): planning now would write the same writes again.
      return Effect().none();
    }
    if (table.behind()) {
      // The table's lag bounds a run's events too: the next one waits for it (the table's next
      // apply continues the run).
      return Effect().none();
    }
    return step(state);
  }

  /**
   * Plans the run's next event: persists it and answers the writes it completes, or first fetches
   * the before images it missed.
   */
  private Effect<Event, PartitionState> step(PartitionState state) {
    GroupCommit r = run;
    long now = System.currentTimeMillis();
    WritePlan plan = new WritePlan(state, wiring.settings(), now, images.over(state, now), r.split);
    GroupCommit.Planned planned = r.plan(plan);
    List<DocumentTable.Key> missing = plan.missing();
    List<String> missingReceipts = plan.missingReceipts();
    if (!missing.isEmpty() || !missingReceipts.isEmpty()) {
      if (++r.fetchRounds > MAX_FETCH_ROUNDS) {
        // The table does not hold what the index says it holds: restart from the journal rather
        // than write on a before image that cannot be proven.
        log.error(
            "partition {}: {} before images are still missing from the documents table after {}"
                + " reads; restarting the partition",
            partition,
            missing.size(),
            MAX_FETCH_ROUNDS);
        return Effect().stop();
      }
      r.fetching = true;
      if (!missingReceipts.isEmpty()) {
        wiring.observer().receiptLookups(partition, 0, missingReceipts.size());
      }
      wiring
          .table()
          .rows(partition, missing)
          .thenCombine(
              wiring.table().receipts(partition, missingReceipts),
              (rows, receipts) -> new BodiesFetched(rows, null, missingReceipts, receipts))
          .whenComplete(
              (fetchedNow, error) ->
                  self.tell(
                      error == null
                          ? fetchedNow
                          : new BodiesFetched(
                              List.of(), SafeErrors.describe(error), List.of(), List.of())));
      return Effect().none();
    }
    images.clear();
    r.fetchRounds = 0;
    if (images.foundInMemory() + images.readFromTable() > 0) {
      wiring.observer().beforeImages(partition, images.foundInMemory(), images.readFromTable());
    }
    if (images.receiptsRuledOut() > 0) {
      wiring.observer().receiptLookups(partition, images.receiptsRuledOut(), 0);
    }
    int refused = WriteReplies.quotaRefusals(planned.outcomes());
    if (refused > 0) {
      wiring.observer().quotaRefused(partition, refused);
    }
    WritePlan.Split split = plan.split();
    Runnable advance =
        () -> {
          if (r.advance(planned, split)) {
            run = null;
          } else {
            self.tell(Continue.INSTANCE);
          }
        };
    if (plan.accepted.isEmpty()) {
      advance.run();
      return run == null ? Effect().unstashAll() : Effect().none();
    }
    String incarnation = state.incarnation != null ? null : UUID.randomUUID().toString();
    int accepted = plan.accepted.size();
    Written written = new Written(incarnation, plan.accepted);
    Map<String, String> rulesBefore = state.ruleFields();
    long bytesBefore = state.eventBytes;
    List<Receipt.Keyed> kept = Receipt.of(written, state.nextSequence, state.receiptsLatestAt);
    return Effect()
        .persist(written)
        .thenRun(
            s -> {
              persisted(s, written, rulesBefore, bytesBefore, kept);
              snapshotIfDue(s);
              wiring.observer().persisted(partition, accepted);
              reportOutbox(s);
              if (wiring.marks().enabled()) {
                r.afterMark = advance;
                marks.raiseToTail(s);
              } else {
                advance.run();
              }
            })
        .thenUnstashAll();
  }

  /**
   * A group commit is persisted: its document changes wait in memory for the table, and the table
   * writer gets the event. A changed document's cached version stays until the table has applied
   * the change and the cache gets the new one: it is never served meanwhile, the index naming a
   * later change than the one it was cached at.
   */
  private void persisted(
      PartitionState s,
      Written written,
      Map<String, String> rulesBefore,
      long bytesBefore,
      List<Receipt.Keyed> kept) {
    List<DocumentChange> changes =
        DocumentChange.of(written, DocumentChange.RuleFields.over(new HashMap<>(rulesBefore)));
    for (DocumentChange change : changes) {
      if (change instanceof DocumentChange.Reset r) {
        cache.dropCollection(r.collection());
      } else if (change instanceof DocumentChange.ClearTombstoneAcls c) {
        cache.dropCollection(c.collection());
      }
    }
    unapplied.add(s.events, changes);
    unapplied.addReceipts(s.events, kept);
    kept.forEach(k -> receiptFilter.add(k.key(), k.receipt().atMillis()));
    table.persisted(s.events, written, s.eventBytes - bytesBefore, changes);
  }

  /**
   * The writes the storage gate lets through: all of them while the storage keeps the required
   * copies; otherwise only row-rule changes, every other write answered with a refusal at once.
   */
  private List<Write> admitted(List<Write> writes) {
    StorageGate.Refusal below = wiring.gate().refusal();
    if (below == null) {
      return writes;
    }
    // Counted before the replies: whoever sees a refusal sees it counted.
    wiring.observer().storageRefused(partition, WriteReplies.refusable(writes));
    return WriteReplies.refuseBelowCopies(writes, below);
  }

  /**
   * Answers every write with the storage-behind refusal: nothing is written (ADR 0036). A row-rule
   * change has no refusal to answer with: unanswered, its sender times out and installs the rule
   * again once the partition serves.
   */
  private void refuseBehind(PartitionState state, List<Write> writes) {
    long acknowledged = marks.acknowledged(state);
    wiring.observer().storageRefused(partition, WriteReplies.refusable(writes));
    WriteReplies.refuseBehind(writes, state.events, acknowledged);
  }

  /** The retained outbox's size and quota use, for the observer. */
  private void reportOutbox(PartitionState s) {
    long entries = s.nextSequence - s.outboxFirst;
    double use =
        Math.max(
            (double) entries / wiring.settings().maxOutboxEntries(),
            (double) s.outboxBytes / wiring.settings().maxOutboxBytes());
    wiring.observer().outbox(partition, entries, s.outboxBytes, use);
  }

  @Override
  public EventHandler<PartitionState, Event> eventHandler() {
    return newEventHandlerBuilder()
        .forAnyState()
        .onEvent(Written.class, (PartitionState state, Written w) -> state.written(w))
        .onEvent(Purged.class, (PartitionState state, Purged p) -> state.purged(p))
        .build();
  }
}
