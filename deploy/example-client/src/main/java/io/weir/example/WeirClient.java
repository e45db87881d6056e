package io.weir.example;

import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.Props;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.pattern.Patterns;

/**
 * A small client of Weir's actor protocol: it keeps the list of server members that are Up (from
 * cluster membership events), sends each request to one of their gateways in turn and retries on
 * another server when a gateway does not answer in time or answers with a retryable error. Writes
 * should carry an idempotency key, so that a retry after a lost answer writes nothing twice.
 */
public final class WeirClient {
  private final ActorSystem system;
  private final Duration timeout;
  private final int attempts;
  private final List<Address> servers = new CopyOnWriteArrayList<>();
  private final AtomicInteger next = new AtomicInteger();
  private final java.util.Set<Address> answered =
      java.util.concurrent.ConcurrentHashMap.newKeySet();

  public WeirClient(ActorSystem system, Duration timeout, int attempts) {
    this.system = system;
    this.timeout = timeout;
    this.attempts = attempts;
    system.actorOf(
        Props.create(MembershipListener.class, () -> new MembershipListener(servers)),
        "weir-servers");
  }

  /** The server members known to be Up. */
  public List<Address> servers() {
    return List.copyOf(servers);
  }

  /** The servers whose gateways have answered so far. */
  public java.util.Set<Address> answered() {
    return java.util.Set.copyOf(answered);
  }

  /** Sends {@code request} to a server's gateway; retries on the next server as described above. */
  public CompletionStage<ClientReply> ask(ClientRequest request) {
    return attempt(request, 1);
  }

  private CompletionStage<ClientReply> attempt(ClientRequest request, int attempt) {
    List<Address> known = new ArrayList<>(servers);
    if (known.isEmpty()) {
      return retryOrFail(
          request, attempt, new IllegalStateException("no Weir server member is Up"));
    }
    Address server = known.get(Math.floorMod(next.getAndIncrement(), known.size()));
    return Patterns.ask(
            system.actorSelection(server + ClientRequest.GATEWAY_PATH), request, timeout)
        .handle(
            (answer, error) -> {
              if (error == null
                  && answer instanceof ClientReply.Failed failed
                  && failed.error().retryable()
                  && attempt < attempts) {
                return retry(request, attempt);
              }
              if (error == null && answer instanceof ClientReply reply) {
                answered.add(server);
                return CompletableFuture.completedFuture(reply);
              }
              return retryOrFail(
                  request,
                  attempt,
                  error != null
                      ? error
                      : new IllegalStateException("unexpected answer from the gateway"));
            })
        .thenCompose(stage -> stage);
  }

  private CompletionStage<ClientReply> retryOrFail(
      ClientRequest request, int attempt, Throwable error) {
    return attempt < attempts ? retry(request, attempt) : CompletableFuture.failedFuture(error);
  }

  private CompletionStage<ClientReply> retry(ClientRequest request, int attempt) {
    long backoffMillis = Math.min(2_000, 100L << Math.min(attempt, 5));
    return CompletableFuture.supplyAsync(
            () -> null, CompletableFuture.delayedExecutor(backoffMillis, TimeUnit.MILLISECONDS))
        .thenCompose(ignored -> attempt(request, attempt + 1));
  }

  /** Keeps {@code servers} equal to the Up members with the server role. */
  static final class MembershipListener extends AbstractActor {
    private final List<Address> servers;

    MembershipListener(List<Address> servers) {
      this.servers = servers;
    }

    @Override
    public void preStart() {
      Cluster.get(getContext().getSystem())
          .subscribe(
              getSelf(),
              ClusterEvent.initialStateAsEvents(),
              ClusterEvent.MemberEvent.class,
              ClusterEvent.ReachabilityEvent.class);
    }

    @Override
    public void postStop() {
      Cluster.get(getContext().getSystem()).unsubscribe(getSelf());
    }

    @Override
    public Receive createReceive() {
      return receiveBuilder()
          .match(ClusterEvent.MemberUp.class, e -> add(e.member()))
          .match(ClusterEvent.ReachableMember.class, e -> add(e.member()))
          .match(ClusterEvent.UnreachableMember.class, e -> servers.remove(e.member().address()))
          .match(
              ClusterEvent.MemberEvent.class,
              e -> {
                if (e.member().status() != MemberStatus.up()) {
                  servers.remove(e.member().address());
                }
              })
          .build();
    }

    private void add(Member member) {
      if (member.hasRole(ClientRequest.SERVER_ROLE)
          && member.status() == MemberStatus.up()
          && !servers.contains(member.address())) {
        servers.add(member.address());
      }
    }
  }
}
