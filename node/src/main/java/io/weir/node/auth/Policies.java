package io.weir.node.auth;

import io.weir.node.OrderedLoads;
import io.weir.node.documents.Documents;
import io.weir.persistence.PolicyStore;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.sharding.partition.PartitionProtocol.RowRuleReply;
import io.weir.sharding.partition.PartitionProtocol.SetRowRule;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;

/**
 * Collection policies as this node knows them: stored in PostgreSQL ({@link PolicyStore}), reloaded
 * on a schedule and at once on this node after a change made through it. A change is stored first,
 * then its row rule is installed in every partition (each advances the collection's row-visibility
 * epoch); until every partition has it, reads of the collection that depend on the rule fail closed
 * with a retryable error (the partition's rule version differs from this one).
 */
public final class Policies {
  private final String schema;
  private final OrderedLoads<Map<String, CollectionPolicy>> view;
  private final Documents documents;

  public Policies(DataSource dataSource, String schema, Executor blocking, Documents documents) {
    this.schema = schema;
    this.documents = documents;
    this.view =
        new OrderedLoads<>(
            dataSource,
            blocking,
            c -> {
              Map<String, CollectionPolicy> byCollection = new HashMap<>();
              PolicyStore.load(c, schema).forEach(p -> byCollection.put(p.collection(), p));
              return Map.copyOf(byCollection);
            },
            null);
  }

  /**
   * Whether the policies were loaded at least once (before that, nothing governed by them is
   * served).
   */
  public boolean loaded() {
    return view.current() != null;
  }

  /** {@code collection}'s policy; a collection without one has {@link CollectionPolicy#none}. */
  public CollectionPolicy policy(String collection) {
    Map<String, CollectionPolicy> all = view.current();
    if (all == null) {
      throw new PoliciesUnavailable();
    }
    CollectionPolicy p = all.get(collection);
    return p == null ? CollectionPolicy.none(collection) : p;
  }

  public List<CollectionPolicy> all() {
    Map<String, CollectionPolicy> all = view.current();
    return all == null
        ? List.of()
        : all.values().stream().sorted(Comparator.comparing(CollectionPolicy::collection)).toList();
  }

  public CompletionStage<Void> reload() {
    return view.run(null).thenApply(v -> null);
  }

  /** The outcome of a policy change: its version and how many partitions installed its row rule. */
  public record Installed(long version, int partitions, int total) {}

  /**
   * Stores {@code policy} under a new version, then installs its row rule in every partition. The
   * stage fails when storage fails; {@link Installed#partitions()} less than the total says some
   * partitions did not answer (repeat the change: versions only move forward).
   */
  public CompletionStage<Installed> put(CollectionPolicy policy) {
    AtomicLong version = new AtomicLong();
    return view.run(c -> version.set(PolicyStore.put(c, schema, policy)))
        .thenCompose(v -> install(policy.collection(), policy.visibilityField(), version.get()));
  }

  private CompletionStage<Installed> install(String collection, String field, long version) {
    List<CompletableFuture<Boolean>> asks = new ArrayList<>();
    for (int n = 0; n < documents.partitions(); n++) {
      asks.add(
          documents
              .<RowRuleReply>ask(n, r -> new SetRowRule(collection, field, version, r))
              .handle((reply, error) -> error == null && reply.version() >= version));
    }
    return CompletableFuture.allOf(asks.toArray(CompletableFuture[]::new))
        .thenApply(
            done ->
                new Installed(
                    version,
                    (int) asks.stream().filter(CompletableFuture::join).count(),
                    asks.size()));
  }

  /**
   * Repairs a partition whose installed row rule is not the policy's: older - the rule is sent to
   * it again (a policy change that did not reach it); newer - this node's view is stale and reloads
   * ({@code partition} -1: several partitions disagree; reload). Runs in the background; the caller
   * fails its request as retryable meanwhile.
   */
  public void reconcile(CollectionPolicy policy, int partition, long installed) {
    if (partition < 0) {
      reload(); // several partitions answered with different versions: this view may be the stale
      // one
    } else if (installed < policy.version()) {
      documents.<RowRuleReply>ask(
          partition,
          r -> new SetRowRule(policy.collection(), policy.visibilityField(), policy.version(), r));
    } else if (installed > policy.version()) {
      reload();
    }
  }

  /** The policies are not loaded yet (storage is not ready): retry later. */
  public static final class PoliciesUnavailable extends RuntimeException {
    PoliciesUnavailable() {
      super("the collection policies are not loaded yet", null, false, false);
    }
  }
}
