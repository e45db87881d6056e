package io.weir.example;

import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.pattern.Patterns;

/**
 * A small client of Weir's actor protocol: it is given the gateway addresses of some server nodes
 * ({@code pekko://weir-gateway@host:port}), sends each request to one of them in turn and retries
 * on the next when a gateway does not answer in time or answers with a retryable error. It is never
 * a member of the Weir cluster (ADR 0028). Writes should carry an idempotency key, so that a retry
 * after a lost answer writes nothing twice.
 */
public final class WeirClient {
  private final ActorSystem system;
  private final Duration timeout;
  private final int attempts;
  private final List<Address> gateways;
  private final AtomicInteger next = new AtomicInteger();
  private final Set<Address> answered = ConcurrentHashMap.newKeySet();

  public WeirClient(ActorSystem system, List<Address> gateways, Duration timeout, int attempts) {
    if (gateways.isEmpty()) {
      throw new IllegalArgumentException("at least one gateway address is needed");
    }
    this.system = system;
    this.gateways = List.copyOf(gateways);
    this.timeout = timeout;
    this.attempts = attempts;
  }

  /** The gateways this client sends to. */
  public List<Address> gateways() {
    return gateways;
  }

  /** The gateways that have answered so far. */
  public Set<Address> answered() {
    return Set.copyOf(answered);
  }

  /** Sends {@code request} to a gateway; retries on the next one as described above. */
  public CompletionStage<ClientReply> ask(ClientRequest request) {
    return attempt(request, 1);
  }

  private CompletionStage<ClientReply> attempt(ClientRequest request, int attempt) {
    Address server = gateways.get(Math.floorMod(next.getAndIncrement(), gateways.size()));
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
}
