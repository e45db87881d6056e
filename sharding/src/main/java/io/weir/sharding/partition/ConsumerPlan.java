package io.weir.sharding.partition;

import io.weir.sharding.partition.ConsumerProtocol.BatchCommitted;
import io.weir.sharding.partition.ConsumerProtocol.CommitBatch;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerConfigured;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefusal;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReleased;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.ConsumerProtocol.ReleaseConsumer;
import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.FrameApplied;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * The projection consumers' writes in a group commit (ADR 0008): configure, release and commit,
 * checked against the partition's state plus what {@code plan} accepted before them. A commit's
 * effects are checked like a frame's mutations and may use the progress reserve ({@link Quota}).
 */
final class ConsumerPlan {
  private final WritePlan plan;

  ConsumerPlan(WritePlan plan) {
    this.plan = plan;
  }

  Consumer consumer(String key) {
    return plan.consumers.containsKey(key)
        ? plan.consumers.get(key)
        : plan.state.consumers.get(key);
  }

  /**
   * Accepts a consumer frame: {@code c} is the consumer afterwards; the event records it with only
   * {@code receipt} (the commit's new receipt, or none), see {@link Consumer#after}.
   */
  private void accept(
      Consumer c,
      List<OutboxEntry> entries,
      ConsumerProtocol.BatchReceipt receipt,
      Set<String> fenced) {
    plan.consumers.put(c.key(), c);
    plan.accept(
        new FrameApplied(
            null,
            entries,
            Optional.empty(),
            List.of(),
            List.of(),
            c.withReceipts(receipt == null ? List.of() : List.of(receipt)),
            List.copyOf(fenced),
            null));
  }

  ConsumerReply configure(ConfigureConsumer c) {
    String invalid = invalidDefinition(c);
    if (invalid != null) {
      return new ConsumerRefused(ConsumerRefusal.INVALID, invalid);
    }
    List<String> collections = List.copyOf(new TreeSet<>(c.collections()));
    List<String> kinds = List.copyOf(new TreeSet<>(c.kinds()));
    Consumer existing = consumer(Partition.consumerKey(c.name(), c.generation()));
    if (existing != null) {
      if (existing.released()) {
        return new ConsumerRefused(
            ConsumerRefusal.RELEASED,
            "this consumer generation was released; configure a new generation or name");
      }
      boolean same =
          existing.collections().equals(collections)
              && existing.kinds().equals(kinds)
              && c.startAfter().map(a -> a == existing.startAfter()).orElse(true);
      return same
          ? new ConsumerConfigured(existing.view(), false)
          : new ConsumerRefused(
              ConsumerRefusal.IMMUTABLE,
              "this consumer generation exists with another definition; a new filter or start"
                  + " needs a new generation or name");
    }
    long active =
        Stream.concat(plan.state.consumers.keySet().stream(), plan.consumers.keySet().stream())
            .distinct()
            .map(this::consumer)
            .filter(x -> !x.released())
            .count();
    if (active >= plan.settings.maxConsumers()) {
      return new ConsumerRefused(
          ConsumerRefusal.TOO_MANY,
          "this partition has "
              + plan.settings.maxConsumers()
              + " active consumers already; release one first");
    }
    long retained = plan.state.outboxFirst - 1;
    long start = c.startAfter().orElse(retained);
    if (start < retained) {
      return new ConsumerRefused(
          ConsumerRefusal.HISTORY_UNAVAILABLE,
          "startAfter "
              + start
              + " was purged already; the retained history starts after "
              + retained);
    }
    if (start > plan.next - 1) {
      return new ConsumerRefused(
          ConsumerRefusal.INVALID,
          "startAfter " + start + " is past the outbox's last position " + (plan.next - 1));
    }
    Consumer created =
        new Consumer(
            c.name(), c.generation(), collections, kinds, start, start, false, -1, List.of());
    accept(created, List.of(), null, Set.of());
    return new ConsumerConfigured(created.view(), true);
  }

  private static String invalidDefinition(ConfigureConsumer c) {
    if (!Partition.validConsumerName(c.name()) || c.generation() < 1) {
      return "a consumer is named by 1 to 64 of A-Z a-z 0-9 _ . - and a generation from 1";
    }
    if (c.collections().size() > Partition.MAX_FILTER_COLLECTIONS) {
      return "a consumer filter names at most " + Partition.MAX_FILTER_COLLECTIONS + " collections";
    }
    for (String collection : c.collections()) {
      if (collection == null || collection.isEmpty() || collection.length() > 128) {
        return "filter collections are 1 to 128 characters";
      }
    }
    for (String kind : c.kinds()) {
      if (!ConsumerProtocol.ENTRY_KINDS.contains(kind)) {
        return "filter kinds are among " + ConsumerProtocol.ENTRY_KINDS;
      }
    }
    return null;
  }

  ConsumerReply release(ReleaseConsumer c) {
    Consumer existing = consumer(Partition.consumerKey(c.name(), c.generation()));
    if (existing == null) {
      return new ConsumerRefused(
          ConsumerRefusal.NOT_FOUND, "no such consumer generation in this partition");
    }
    if (existing.released()) {
      return new ConsumerReleased(existing.view(), true);
    }
    Consumer released =
        new Consumer(
            existing.name(),
            existing.generation(),
            existing.collections(),
            existing.kinds(),
            existing.startAfter(),
            existing.checkpoint(),
            true,
            existing.reservationCut(),
            List.of());
    accept(released, List.of(), null, Set.of());
    return new ConsumerReleased(released.view(), false);
  }

  /**
   * Commits a batch. In order: the consumer must exist and not be released and the incarnation must
   * match (fenced tokens); a batch already committed answers its receipt (same effects) or a
   * conflict (other effects); a batch read from another checkpoint is stale; then the effects are
   * checked like a frame, and the quota (or the progress reserve) applies. {@link
   * WritePlan.Stop#FULL} when its effects fit only an event of their own.
   */
  Object commit(CommitBatch c) {
    Consumer con = consumer(Partition.consumerKey(c.name(), c.generation()));
    if (con == null) {
      return new ConsumerRefused(
          ConsumerRefusal.NOT_FOUND, "no such consumer generation in this partition");
    }
    if (con.released()) {
      return new ConsumerRefused(
          ConsumerRefusal.TOKEN_INVALIDATED,
          "the consumer generation was released; its batch tokens are no longer accepted");
    }
    if (!c.incarnation().equals(plan.state.incarnation)) {
      return new ConsumerRefused(
          ConsumerRefusal.TOKEN_INVALIDATED,
          "the batch was read from another incarnation of this partition");
    }
    String digest = Partition.effectsDigest(c.effects());
    for (ConsumerProtocol.BatchReceipt r : con.receipts()) {
      if (r.start() == c.start() && r.end() == c.end()) {
        return r.effectsDigest().equals(digest)
            ? new BatchCommitted(r, con.checkpoint(), true)
            : new ConsumerRefused(
                ConsumerRefusal.CONFLICT,
                "this batch was committed with other effects",
                con.checkpoint(),
                -1,
                0);
      }
    }
    if (c.start() != con.checkpoint()) {
      return new ConsumerRefused(
          ConsumerRefusal.STALE,
          "the consumer's checkpoint is no longer the batch's start; read a new batch",
          con.checkpoint(),
          -1,
          0);
    }
    if (c.end() > plan.next - 1 || c.end() < c.start()) {
      return new ConsumerRefused(
          ConsumerRefusal.INVALID, "the batch ends past the outbox's last position");
    }
    if (c.start() == c.end() && !c.effects().isEmpty()) {
      return new ConsumerRefused(
          ConsumerRefusal.INVALID, "an empty tail batch cannot carry effects");
    }
    if (c.effects().size() > plan.settings.maxEffects()) {
      return new ConsumerRefused(
          ConsumerRefusal.INVALID,
          "a batch carries at most " + plan.settings.maxEffects() + " effects");
    }
    for (int i = 0; i < c.effects().size(); i++) {
      Mutation m = c.effects().get(i);
      boolean expects =
          m instanceof Upsert u
              ? u.expectedRevision().isPresent() && u.keep().isEmpty()
              : m instanceof Delete d && d.expectedRevision().isPresent();
      if (!expects) {
        return new ConsumerRefused(
            ConsumerRefusal.INVALID,
            "effect " + i + " must be an upsert or delete with an expected revision");
      }
    }
    if (c.start() == c.end()) {
      // An empty tail batch without effects: nothing to write.
      return new BatchCommitted(
          new ConsumerProtocol.BatchReceipt(
              c.start(), c.end(), digest, c.commandId(), plan.next, List.of(), plan.now),
          con.checkpoint(),
          false);
    }
    Object evaluated = plan.evaluate(c.effects(), 0, false, null, false);
    if (evaluated instanceof Conflict x) {
      return new ConsumerRefused(
          ConsumerRefusal.REVISION_CONFLICT,
          "effect " + x.index() + " expects another revision",
          con.checkpoint(),
          x.index(),
          x.actualRevision());
    }
    if (evaluated instanceof Rejected r) {
      return new ConsumerRefused(ConsumerRefusal.INVALID, r.reason());
    }
    MutationCheck.Evaluation ev = (MutationCheck.Evaluation) evaluated;
    if (!plan.fitsRow(ev.entries().size(), ev.bytes())) {
      if (!plan.accepted.isEmpty()) {
        return WritePlan.Stop.FULL;
      }
      if (ev.entries().size() > plan.settings.maxFrameEntries()
          || ev.bytes() > plan.settings.maxFrameBytes()) {
        return new ConsumerRefused(
            ConsumerRefusal.INVALID,
            "the batch's effects are more than one journal row holds (weir.partitions.frame.*);"
                + " commit fewer effects",
            con.checkpoint(),
            -1,
            0);
      }
    }
    long cut = con.reservationCut();
    boolean reserveAllowed = cut != plan.state.outboxFirst;
    Quota.Admission admission = plan.admit(ev.seqAfter(), ev.bytes(), reserveAllowed);
    if (admission == Quota.Admission.REFUSED) {
      return new ConsumerRefused(
          ConsumerRefusal.QUOTA_EXCEEDED,
          reserveAllowed
              ? "the outbox and its progress reserve are full; purge, then retry"
              : "the outbox is full and this consumer used the progress reserve since the last"
                  + " purge; purge, then retry",
          con.checkpoint(),
          -1,
          0);
    }
    if (admission == Quota.Admission.RESERVE) {
      cut = plan.state.outboxFirst;
    }
    long first = plan.next;
    plan.take(ev.seen(), ev.seqAfter(), ev.bytes());
    ConsumerProtocol.BatchReceipt receipt =
        new ConsumerProtocol.BatchReceipt(
            c.start(), c.end(), digest, c.commandId(), first, ev.revisions(), plan.now);
    List<ConsumerProtocol.BatchReceipt> receipts = new ArrayList<>(con.receipts());
    receipts.add(receipt);
    while (receipts.size() > Partition.CONSUMER_RECEIPTS) {
      receipts.remove(0);
    }
    Consumer moved =
        new Consumer(
            con.name(),
            con.generation(),
            con.collections(),
            con.kinds(),
            con.startAfter(),
            c.end(),
            false,
            cut,
            receipts);
    accept(moved, ev.entries(), receipt, ev.fenced());
    return new BatchCommitted(receipt, c.end(), false);
  }
}
