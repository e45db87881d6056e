package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.partition.ConsumerProtocol.BatchCommitted;
import io.weir.sharding.partition.ConsumerProtocol.CommitBatch;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerConfigured;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefusal;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReleased;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerSpan;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerView;
import io.weir.sharding.partition.ConsumerProtocol.ReadConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ReleaseConsumer;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.OutboxPurged;
import io.weir.sharding.partition.PartitionProtocol.PurgeOutbox;
import io.weir.sharding.partition.PartitionProtocol.PurgeRefused;
import io.weir.sharding.partition.PartitionProtocol.PurgeReply;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.TreeMap;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.query.javadsl.PersistenceTestKitReadJournal;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/**
 * Model-based test of the projection contract: long random sequences of document writes and
 * deletes, configure, read, commit (fresh, retried, stale, with wrong revisions, with changed
 * effects), release, purge and restarts, run against a partition and against a small in-memory
 * model of the contract; after every step the replies and the partition's status must equal the
 * model's. A divergence fails with its seed and step. {@code -Dweir.model.seeds=N} runs more seeds
 * (default 40), {@code -Dweir.model.steps=N} longer sequences (default 150).
 */
class ConsumerModelTest {
  private static final ActorTestKit KIT =
      ActorTestKit.create(
          "consumer-model",
          EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load()));

  /** Small limits, so quota, reserve and the consumer limit are reached often. */
  private static final PartitionSettings LIMITS =
      new PartitionSettings(24, 1L << 20, 16, 1000).withProjections(3, 4, 1L << 20, 3);

  private static final List<String> NAMES = List.of("a", "b", "c", "d");
  private static final List<String> SOURCES = List.of("src", "other");
  private static final OutboxReader READER =
      new OutboxReader(
          KIT.system(),
          PersistenceQuery.get(KIT.system())
              .getReadJournalFor(
                  PersistenceTestKitReadJournal.class, PersistenceTestKitReadJournal.Identifier()));

  /** How often each outcome happened: the run shows which rules it exercised. */
  private static final Map<String, Integer> OUTCOMES = new TreeMap<>();

  private static void seen(Object reply) {
    String name =
        reply instanceof ConsumerRefused r
            ? "refused-" + r.refusal().name().toLowerCase(java.util.Locale.ROOT)
            : reply instanceof BatchCommitted c
                ? (c.alreadyProcessed() ? "already-processed" : "committed")
                : reply.getClass().getSimpleName();
    OUTCOMES.merge(name, 1, Integer::sum);
  }

  @AfterAll
  static void stop() {
    KIT.shutdownTestKit();
  }

  // ---- the model ----

  record Doc(long revision, String body, boolean deleted) {}

  /**
   * @param segment the first sequence of the frame that wrote it (purges reclaim bytes by whole
   *     frames)
   */
  record Entry(
      long sequence,
      long segment,
      String collection,
      String id,
      String kind,
      String before,
      String after) {
    long bytes() {
      return Partition.ENTRY_OVERHEAD
          + (before == null ? 0 : before.length())
          + (after == null ? 0 : after.length());
    }
  }

  static final class ModelConsumer {
    final String name;
    final List<String> collections;
    final long startAfter;
    long checkpoint;
    boolean released;
    long cut = -1;

    /** (start, end) -> the effects and the receipt's first sequence and revisions. */
    final Map<List<Long>, Object[]> receipts = new java.util.LinkedHashMap<>();

    ModelConsumer(String name, List<String> collections, long startAfter) {
      this.name = name;
      this.collections = collections;
      this.startAfter = startAfter;
      this.checkpoint = startAfter;
    }

    ConsumerView view() {
      return new ConsumerView(name, 1, collections, List.of(), startAfter, checkpoint, released);
    }
  }

  /** A batch as read: to be committed later, perhaps after it went stale. */
  record ReadBatch(String consumer, String incarnation, long start, long end) {}

  static final class Model {
    final TreeMap<String, Doc> docs = new TreeMap<>();
    final List<Entry> outbox = new ArrayList<>();
    long first = 1;
    long next = 1;
    final TreeMap<String, ModelConsumer> consumers = new TreeMap<>();

    /**
     * Bytes of the frames not wholly purged: the partition reclaims a frame's bytes with its last
     * entry.
     */
    long retainedBytes() {
      Map<Long, Long> lastOfSegment = new HashMap<>();
      outbox.forEach(e -> lastOfSegment.merge(e.segment(), e.sequence(), Math::max));
      return outbox.stream()
          .filter(e -> lastOfSegment.get(e.segment()) >= first)
          .mapToLong(Entry::bytes)
          .sum();
    }

    Quota.Admission admit(long added, long addedBytes, boolean reserveAllowed) {
      return Quota.admit(
          LIMITS, next - first, next + added - first, retainedBytes() + addedBytes, reserveAllowed);
    }

    Doc doc(String collection, String id) {
      return docs.get(collection + "\0" + id);
    }

    long activeConsumers() {
      return consumers.values().stream().filter(c -> !c.released).count();
    }
  }

  // ---- the run ----

  @Test
  void thePartitionFollowsTheModel() {
    int seeds = Integer.getInteger("weir.model.seeds", 40);
    int steps = Integer.getInteger("weir.model.steps", 150);
    long base = Long.getLong("weir.model.seed", 20261130L);
    long commits = 0;
    for (int s = 0; s < seeds; s++) {
      long seed = base + s;
      try {
        commits += run(seed, steps);
      } catch (AssertionError | RuntimeException e) {
        throw new AssertionError(
            "model divergence with seed "
                + seed
                + " (rerun: -Dweir.model.seed="
                + seed
                + " -Dweir.model.seeds=1): "
                + e.getMessage(),
            e);
      }
    }
    System.out.println(
        "consumer model: seeds="
            + seeds
            + " steps="
            + steps
            + " committed-batches="
            + commits
            + " divergences=0 outcomes="
            + OUTCOMES);
    for (String rule :
        List.of(
            "committed",
            "already-processed",
            "refused-stale",
            "refused-conflict",
            "refused-revision_conflict",
            "refused-quota_exceeded",
            "refused-token_invalidated",
            "refused-too_many",
            "refused-history_unavailable",
            "refused-immutable",
            "refused-released",
            "OutboxPurged")) {
      assertThat(OUTCOMES).as("the random runs should exercise " + rule).containsKey(rule);
    }
  }

  private int run(long seed, int steps) {
    SplittableRandom random = new SplittableRandom(seed);
    EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p =
        EventSourcedBehaviorTestKit.create(KIT.system(), Partition.create(1, LIMITS));
    p.clear();
    Model m = new Model();
    List<ReadBatch> batches = new ArrayList<>();
    int committed = 0;
    for (int step = 0; step < steps; step++) {
      int op = random.nextInt(100);
      String where = "step " + step + " op " + op;
      if (op < 30) {
        write(p, m, random, where);
      } else if (op < 38) {
        configure(p, m, random, where);
      } else if (op < 58) {
        read(p, m, random, batches, where);
      } else if (op < 82) {
        committed += commit(p, m, random, batches, where);
      } else if (op < 87) {
        release(p, m, random, where);
      } else if (op < 97) {
        purge(p, m, random, where);
      } else {
        p.restart();
      }
      checkStatus(p, m, where);
    }
    return committed;
  }

  private void write(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p,
      Model m,
      SplittableRandom random,
      String where) {
    String collection = SOURCES.get(random.nextInt(SOURCES.size()));
    String id = "d" + random.nextInt(6);
    Doc cur = m.doc(collection, id);
    boolean delete = cur != null && !cur.deleted() && random.nextInt(4) == 0;
    String body = "{\"v\":" + random.nextInt(1000) + "}";
    Mutation mutation =
        delete
            ? new Delete(collection, id, Optional.empty())
            : new Upsert(collection, id, body, Optional.empty());
    FrameReply reply =
        p.<FrameReply>runCommand(
                r ->
                    new ApplyFrame("w" + random.nextLong(), List.of(mutation), Optional.empty(), r))
            .reply();
    String before = cur == null || cur.deleted() ? null : cur.body();
    Entry e =
        new Entry(
            m.next,
            m.next,
            collection,
            id,
            delete ? "delete" : "upsert",
            before,
            delete ? null : body);
    if (m.admit(1, e.bytes(), false) == Quota.Admission.REFUSED) {
      assertThat(reply).as(where).isInstanceOf(QuotaExceeded.class);
      return;
    }
    long revision = cur == null ? 1 : cur.revision() + 1;
    assertThat(reply)
        .as(where)
        .isEqualTo(new Applied(((Applied) reply).commandId(), m.next, List.of(revision), false));
    m.outbox.add(e);
    m.next++;
    m.docs.put(collection + "\0" + id, new Doc(revision, delete ? null : body, delete));
  }

  private void configure(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p,
      Model m,
      SplittableRandom random,
      String where) {
    String name = NAMES.get(random.nextInt(NAMES.size()));
    List<String> collections =
        switch (random.nextInt(4)) {
          case 0 -> List.of();
          case 1 -> List.of("src");
          case 2 -> List.of("other");
          default -> List.of("other", "src");
        };
    Optional<Long> startAfter =
        switch (random.nextInt(5)) {
          case 0 -> Optional.of(m.first - 1);
          case 1 -> Optional.of(Math.max(0, m.first - 2));
          case 2 -> Optional.of(m.next - 1);
          case 3 -> Optional.of(m.next);
          default -> Optional.empty();
        };
    ConsumerReply reply =
        p.<ConsumerReply>runCommand(
                r -> new ConfigureConsumer(name, 1, collections, List.of(), startAfter, r))
            .reply();
    seen(reply);
    ModelConsumer existing = m.consumers.get(name);
    if (existing != null) {
      if (existing.released) {
        assertRefused(reply, ConsumerRefusal.RELEASED, where);
      } else if (existing.collections.equals(collections)
          && startAfter.map(a -> a == existing.startAfter).orElse(true)) {
        assertThat(reply).as(where).isEqualTo(new ConsumerConfigured(existing.view(), false));
      } else {
        assertRefused(reply, ConsumerRefusal.IMMUTABLE, where);
      }
      return;
    }
    long start = startAfter.orElse(m.first - 1);
    if (m.activeConsumers() >= LIMITS.maxConsumers()) {
      assertRefused(reply, ConsumerRefusal.TOO_MANY, where);
    } else if (start < m.first - 1) {
      assertRefused(reply, ConsumerRefusal.HISTORY_UNAVAILABLE, where);
    } else if (start > m.next - 1) {
      assertRefused(reply, ConsumerRefusal.INVALID, where);
    } else {
      ModelConsumer c = new ModelConsumer(name, collections, start);
      m.consumers.put(name, c);
      assertThat(reply).as(where).isEqualTo(new ConsumerConfigured(c.view(), true));
    }
  }

  private void read(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p,
      Model m,
      SplittableRandom random,
      List<ReadBatch> batches,
      String where) {
    String name = NAMES.get(random.nextInt(NAMES.size()));
    int maxEntries = 1 + random.nextInt(8);
    long maxBytes = random.nextInt(3) == 0 ? 100 + random.nextInt(200) : 1 << 20;
    ConsumerReply reply =
        p.<ConsumerReply>runCommand(r -> new ReadConsumer(name, 1, maxEntries, r)).reply();
    seen(reply);
    ModelConsumer c = m.consumers.get(name);
    if (c == null) {
      assertRefused(reply, ConsumerRefusal.NOT_FOUND, where);
      return;
    }
    if (c.released) {
      assertRefused(reply, ConsumerRefusal.TOKEN_INVALIDATED, where);
      return;
    }
    ConsumerSpan span = (ConsumerSpan) reply;
    assertThat(span.consumer()).as(where).isEqualTo(c.view());
    assertThat(span.tail()).as(where).isEqualTo(m.next - 1);
    long through = Math.min(m.next - 1, c.checkpoint + maxEntries);
    List<Partition.OutboxEntry> entries =
        READER
            .entries(1, span.journalSequences(), c.checkpoint, through)
            .toCompletableFuture()
            .join();
    BatchSelection.Result cut =
        BatchSelection.select(span.consumer(), c.checkpoint, entries, span.tail(), maxBytes);
    // The model's cut.
    List<Long> selected = new ArrayList<>();
    long modelThrough = c.checkpoint;
    long bytes = 0;
    boolean exceeded = false;
    for (Entry e : m.outbox) {
      if (e.sequence() <= c.checkpoint || e.sequence() > through) {
        continue;
      }
      if (c.collections.isEmpty() || c.collections.contains(e.collection())) {
        long size =
            (e.before() == null ? 0 : e.before().length())
                + (e.after() == null ? 0 : e.after().length());
        if (bytes + size > maxBytes) {
          exceeded = selected.isEmpty() && modelThrough == c.checkpoint;
          break;
        }
        selected.add(e.sequence());
        bytes += size;
      }
      modelThrough = e.sequence();
    }
    if (exceeded) {
      assertThat(cut).as(where).isInstanceOf(BatchSelection.BudgetExceeded.class);
      return;
    }
    BatchSelection.Batch batch = (BatchSelection.Batch) cut;
    assertThat(batch.entries())
        .as(where)
        .extracting(Partition.OutboxEntry::sequence)
        .containsExactlyElementsOf(selected);
    assertThat(batch.through()).as(where).isEqualTo(modelThrough);
    assertThat(batch.hasMore()).as(where).isEqualTo(modelThrough < m.next - 1);
    batches.add(new ReadBatch(name, span.incarnation(), c.checkpoint, batch.through()));
  }

  private int commit(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p,
      Model m,
      SplittableRandom random,
      List<ReadBatch> batches,
      String where) {
    if (batches.isEmpty()) {
      return 0;
    }
    // Mostly the latest batches (fresh), sometimes older ones (stale or retries).
    int index =
        random.nextInt(4) == 0
            ? random.nextInt(batches.size())
            : batches.size() - 1 - random.nextInt(Math.min(2, batches.size()));
    ReadBatch b = batches.get(index);
    List<Mutation> effects = new ArrayList<>();
    int count = random.nextInt(LIMITS.maxEffects() + 1);
    Map<String, Doc> overlay = new HashMap<>();
    for (int i = 0; i < count; i++) {
      String id = "x" + random.nextInt(4);
      Doc cur = overlay.containsKey(id) ? overlay.get(id) : m.doc("derived", id);
      long revision = cur == null ? 0 : cur.revision();
      long expected = random.nextInt(10) == 0 ? revision + 1 : revision; // sometimes wrong
      boolean delete = cur != null && !cur.deleted() && random.nextInt(3) == 0;
      String body = "{\"from\":" + b.end() + "}";
      effects.add(
          delete
              ? new Delete("derived", id, Optional.of(expected))
              : new Upsert("derived", id, body, Optional.of(expected)));
      overlay.put(id, new Doc(revision + 1, delete ? null : body, delete));
    }
    ConsumerReply reply =
        p.<ConsumerReply>runCommand(
                r ->
                    new CommitBatch(
                        "c" + random.nextLong(),
                        b.consumer(),
                        1,
                        b.incarnation(),
                        b.start(),
                        b.end(),
                        effects,
                        r))
            .reply();
    seen(reply);
    ModelConsumer c = m.consumers.get(b.consumer());
    if (c.released) {
      assertRefused(reply, ConsumerRefusal.TOKEN_INVALIDATED, where);
      return 0;
    }
    Object[] receipt = c.receipts.get(List.of(b.start(), b.end()));
    if (receipt != null) {
      if (receipt[0].equals(effects)) {
        BatchCommitted done = (BatchCommitted) reply;
        assertThat(done.alreadyProcessed()).as(where).isTrue();
        assertThat(done.receipt().firstSequence()).as(where).isEqualTo(receipt[1]);
        assertThat(done.receipt().revisions()).as(where).isEqualTo(receipt[2]);
      } else {
        assertRefused(reply, ConsumerRefusal.CONFLICT, where);
      }
      return 0;
    }
    if (b.start() != c.checkpoint) {
      assertRefused(reply, ConsumerRefusal.STALE, where);
      return 0;
    }
    if (b.start() == b.end()) {
      if (effects.isEmpty()) {
        assertThat(((BatchCommitted) reply).checkpoint()).as(where).isEqualTo(c.checkpoint);
      } else {
        assertRefused(reply, ConsumerRefusal.INVALID, where);
      }
      return 0;
    }
    // Evaluate the effects in order.
    List<Entry> entries = new ArrayList<>();
    List<Long> revisions = new ArrayList<>();
    Map<String, Doc> seen = new HashMap<>();
    long seq = m.next;
    for (int i = 0; i < effects.size(); i++) {
      Mutation e = effects.get(i);
      String id = e instanceof Upsert u ? u.id() : ((Delete) e).id();
      long expected =
          e instanceof Upsert u
              ? u.expectedRevision().get()
              : ((Delete) e).expectedRevision().get();
      Doc cur = seen.containsKey(id) ? seen.get(id) : m.doc("derived", id);
      long revision = cur == null ? 0 : cur.revision();
      if (expected != revision) {
        ConsumerRefused refused = assertRefused(reply, ConsumerRefusal.REVISION_CONFLICT, where);
        assertThat(refused.index()).as(where).isEqualTo(i);
        assertThat(refused.actualRevision()).as(where).isEqualTo(revision);
        return 0;
      }
      String before = cur == null || cur.deleted() ? null : cur.body();
      boolean delete = e instanceof Delete;
      String after = delete ? null : ((Upsert) e).body();
      entries.add(
          new Entry(seq++, m.next, "derived", id, delete ? "delete" : "upsert", before, after));
      seen.put(id, new Doc(revision + 1, after, delete));
      revisions.add(revision + 1);
    }
    long addedBytes = entries.stream().mapToLong(Entry::bytes).sum();
    Quota.Admission admission = m.admit(entries.size(), addedBytes, c.cut != m.first);
    if (admission == Quota.Admission.REFUSED) {
      assertRefused(reply, ConsumerRefusal.QUOTA_EXCEEDED, where);
      return 0;
    }
    BatchCommitted done = (BatchCommitted) reply;
    assertThat(done.alreadyProcessed()).as(where).isFalse();
    assertThat(done.checkpoint()).as(where).isEqualTo(b.end());
    assertThat(done.receipt().firstSequence()).as(where).isEqualTo(m.next);
    assertThat(done.receipt().revisions()).as(where).isEqualTo(revisions);
    if (admission == Quota.Admission.RESERVE) {
      c.cut = m.first;
    }
    m.outbox.addAll(entries);
    m.next = seq;
    seen.forEach((id, d) -> m.docs.put("derived\0" + id, d));
    c.checkpoint = b.end();
    c.receipts.put(
        List.of(b.start(), b.end()),
        new Object[] {List.copyOf(effects), done.receipt().firstSequence(), revisions});
    while (c.receipts.size() > Partition.CONSUMER_RECEIPTS) {
      c.receipts.remove(c.receipts.keySet().iterator().next());
    }
    return 1;
  }

  private void release(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p,
      Model m,
      SplittableRandom random,
      String where) {
    String name = NAMES.get(random.nextInt(NAMES.size()));
    ConsumerReply reply = p.<ConsumerReply>runCommand(r -> new ReleaseConsumer(name, 1, r)).reply();
    seen(reply);
    ModelConsumer c = m.consumers.get(name);
    if (c == null) {
      assertRefused(reply, ConsumerRefusal.NOT_FOUND, where);
      return;
    }
    boolean already = c.released;
    c.released = true;
    c.receipts.clear();
    assertThat(reply).as(where).isEqualTo(new ConsumerReleased(c.view(), already));
  }

  private void purge(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p,
      Model m,
      SplittableRandom random,
      String where) {
    long through = m.first - 2 + random.nextInt((int) (m.next - m.first) + 3);
    long maxEntries = 1 + random.nextInt(10);
    PurgeReply reply =
        p.<PurgeReply>runCommand(r -> new PurgeOutbox(Math.max(0, through), maxEntries, r)).reply();
    seen(reply);
    long asked = Math.max(0, through);
    if (asked >= m.next) {
      assertThat(reply).as(where).isInstanceOf(PurgeRefused.class);
      return;
    }
    long bounded = Math.min(asked, m.first - 1 + maxEntries);
    Optional<Long> pin =
        m.consumers.values().stream()
            .filter(c -> !c.released)
            .map(c -> c.checkpoint)
            .min(Long::compare);
    boolean pinned = pin.isPresent() && pin.get() < bounded;
    long target = pinned ? pin.get() : bounded;
    if (target < m.first) {
      assertThat(reply).as(where).isEqualTo(new OutboxPurged(m.first, m.next, 0, false, pinned));
      return;
    }
    long purged = target - m.first + 1;
    m.first = target + 1;
    assertThat(reply)
        .as(where)
        .isEqualTo(new OutboxPurged(m.first, m.next, purged, !pinned && target < asked, pinned));
  }

  private void checkStatus(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p,
      Model m,
      String where) {
    PartitionStatus s = p.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(s.outboxFirst()).as(where + ": outboxFirst").isEqualTo(m.first);
    assertThat(s.outboxNext()).as(where + ": outboxNext").isEqualTo(m.next);
    assertThat(s.outboxBytes()).as(where + ": outboxBytes").isEqualTo(m.retainedBytes());
    assertThat(s.documents()).as(where + ": documents").isEqualTo(m.docs.size());
    assertThat(s.consumers())
        .as(where + ": consumers")
        .containsExactlyElementsOf(m.consumers.values().stream().map(ModelConsumer::view).toList());
  }

  private static ConsumerRefused assertRefused(
      ConsumerReply reply, ConsumerRefusal refusal, String where) {
    assertThat(reply).as(where).isInstanceOf(ConsumerRefused.class);
    assertThat(((ConsumerRefused) reply).refusal())
        .as(where + ": " + ((ConsumerRefused) reply).reason())
        .isEqualTo(refusal);
    return (ConsumerRefused) reply;
  }
}
