package io.weir.node.gateway;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigValueFactory;
import io.weir.protocol.client.ClientRequest;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.BootstrapSetup;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.setup.ActorSystemSetup;
import org.apache.pekko.http.javadsl.server.Route;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The protocol gateway's own door (ADR 0028): an actor system of its own, named {@value
 * ClientRequest#GATEWAY_SYSTEM}, with Pekko remoting (not cluster membership) on a port of its own,
 * holding nothing but the gateway at {@value ClientRequest#GATEWAY_PATH}.
 *
 * <p>Clients are never members of the cluster, so they cannot address partitions, sessions,
 * singletons or the cluster's own daemons: those live in the node's other actor system, whose port
 * is for server nodes only. Pekko's untrusted mode is on here: messages sent by selection reach
 * only the gateway's path, system messages (watch, create, terminate) and {@code PossiblyHarmful}
 * ones are dropped, remote deployment is off. What a client sends to any other path of this system
 * finds nothing to act on it. This system logs at ERROR only and not the remoting life cycle, whose
 * lines name the client's chosen system name and address.
 */
public final class GatewayEndpoint {
  private static final Logger log = LoggerFactory.getLogger(GatewayEndpoint.class);

  private final ActorSystem system;

  private GatewayEndpoint(ActorSystem system) {
    this.system = system;
  }

  /**
   * Opens the gateway port and starts the gateway over {@code routes} of {@code node}. The port is
   * bound when this returns.
   *
   * @param config the node's configuration (logging and serialization settings are taken from it)
   * @throws RuntimeException when the port cannot be bound (no system is left running)
   */
  public static GatewayEndpoint start(
      org.apache.pekko.actor.typed.ActorSystem<?> node,
      Config config,
      GatewaySettings settings,
      Route routes) {
    ActorSystemSetup setup =
        ActorSystemSetup.create(BootstrapSetup.create(config(config, settings)));
    if (settings.tls().isPresent()) {
      setup = setup.withSetup(settings.tls().get().engineProviderSetup());
    }
    ActorSystem system = ActorSystem.create(ClientRequest.GATEWAY_SYSTEM, setup);
    try {
      ProtocolGateway.start(node, system, routes, Duration.ofSeconds(10), settings.maxInFlight());
    } catch (RuntimeException | LinkageError e) {
      system.terminate();
      throw e;
    }
    GatewayEndpoint endpoint = new GatewayEndpoint(system);
    // The node's shutdown closes the door first: no new client request while the node drains.
    CoordinatedShutdown.get(node)
        .addTask(
            CoordinatedShutdown.PhaseServiceUnbind(),
            "close-protocol-gateway",
            () -> endpoint.close().thenApply(ignored -> Done.getInstance()));
    log.info(
        "protocol gateway: {}{} ({}, at most {} requests at once)",
        endpoint.address(),
        ClientRequest.GATEWAY_PATH,
        settings.tls().map(t -> "mutual TLS, " + t.protocol()).orElse("plain TCP"),
        settings.maxInFlight());
    return endpoint;
  }

  /** The gateway system's address, {@code pekko://weir-gateway@host:port}. */
  public Address address() {
    return ((ExtendedActorSystem) system).provider().getDefaultAddress();
  }

  /** Closes the port and stops the gateway. */
  public CompletionStage<?> close() {
    system.terminate();
    return system.getWhenTerminated();
  }

  /** Waits at most {@code timeout} for {@link #close()}. */
  public void closeAndWait(Duration timeout) throws Exception {
    close().toCompletableFuture().get(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** The gateway system's configuration: the node's, with remoting of its own and nothing else. */
  static Config config(Config node, GatewaySettings settings) {
    Map<String, Object> overrides =
        Map.ofEntries(
            Map.entry("pekko.actor.provider", "remote"),
            Map.entry("pekko.extensions", List.of()),
            Map.entry(
                "pekko.remote.artery.transport", settings.tls().isPresent() ? "tls-tcp" : "tcp"),
            Map.entry("pekko.remote.artery.canonical.hostname", settings.host()),
            Map.entry("pekko.remote.artery.canonical.port", settings.port()),
            Map.entry("pekko.remote.artery.untrusted-mode", "on"),
            Map.entry(
                "pekko.remote.artery.trusted-selection-paths", List.of(ClientRequest.GATEWAY_PATH)),
            Map.entry("pekko.remote.artery.log-remote-lifecycle-events", "off"),
            Map.entry("pekko.remote.artery.log-received-messages", "off"),
            Map.entry("pekko.remote.artery.log-sent-messages", "off"),
            Map.entry("pekko.remote.warn-about-direct-use", "off"),
            Map.entry("pekko.loglevel", "ERROR"),
            Map.entry("pekko.log-dead-letters", "off"),
            Map.entry("pekko.coordinated-shutdown.run-by-jvm-shutdown-hook", "off"),
            Map.entry("pekko.coordinated-shutdown.exit-jvm", "off"));
    Config result = node;
    for (Map.Entry<String, Object> e : overrides.entrySet()) {
      result = result.withValue(e.getKey(), ConfigValueFactory.fromAnyRef(e.getValue()));
    }
    return result.resolve();
  }
}
