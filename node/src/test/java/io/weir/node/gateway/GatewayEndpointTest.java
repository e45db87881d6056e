package io.weir.node.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.node.tls.ClusterTls;
import io.weir.persistence.SettingsException;
import io.weir.persistence.testing.TestCertificates;
import io.weir.persistence.testing.TestPorts;
import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import io.weir.protocol.client.Credentials;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Kill;
import org.apache.pekko.actor.PoisonPill;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.Directives;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.Patterns;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The gateway's own port (ADR 0028): a client that is no cluster member reaches the gateway by
 * selection and gets the routes' answers; whatever else it sends, to the gateway or to any other
 * path of the gateway's actor system, runs no route and does not stop the gateway.
 */
class GatewayEndpointTest {
  private org.apache.pekko.actor.typed.ActorSystem<Void> node;
  private GatewayEndpoint endpoint;
  private ActorSystem client;
  private final AtomicInteger served = new AtomicInteger();
  private String base;

  @BeforeEach
  void start() {
    Config local =
        ConfigFactory.parseMap(
                Map.of(
                    "pekko.actor.provider", "local",
                    "pekko.coordinated-shutdown.run-by-jvm-shutdown-hook", "off"))
            .withFallback(ConfigFactory.load());
    node = org.apache.pekko.actor.typed.ActorSystem.create(Behaviors.empty(), "node", local);
    Route routes = servedRoutes();
    int[] port = new int[1];
    endpoint =
        TestPorts.bound(
            p -> {
              port[0] = p;
              return GatewayEndpoint.start(
                  node,
                  local,
                  new GatewaySettings(true, "127.0.0.1", p, 4, Optional.empty()),
                  routes);
            });
    base = "pekko://" + ClientRequest.GATEWAY_SYSTEM + "@127.0.0.1:" + port[0];
    client =
        TestPorts.bound(
            clientPort ->
                ActorSystem.create(
                    "some-client",
                    ConfigFactory.parseMap(
                            Map.of(
                                "pekko.actor.provider", "remote",
                                "pekko.remote.artery.canonical.hostname", "127.0.0.1",
                                "pekko.remote.artery.canonical.port", clientPort,
                                "pekko.remote.warn-about-direct-use", "off",
                                "pekko.coordinated-shutdown.run-by-jvm-shutdown-hook", "off"))
                        .withFallback(ConfigFactory.load())));
  }

  @AfterEach
  void stop() throws Exception {
    client.terminate();
    endpoint.closeAndWait(Duration.ofSeconds(30));
    node.terminate();
    client.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
  }

  @Test
  void aClientReachesTheGatewayAndNothingElse() throws Exception {
    assertThat(endpoint.address().toString()).isEqualTo(base);
    assertThat(ask()).isInstanceOf(ClientReply.Ok.class);
    assertThat(served).hasValue(1);

    // Stop messages by selection are dropped in untrusted mode; by reference they reach the
    // gateway as ordinary messages that are no request. Other paths find nothing.
    ActorRef gateway =
        ((org.apache.pekko.actor.ExtendedActorSystem) client)
            .provider()
            .resolveActorRef(base + ClientRequest.GATEWAY_PATH);
    for (String path : List.of(ClientRequest.GATEWAY_PATH, "/user", "/system", "", "/")) {
      client.actorSelection(base + path).tell(PoisonPill.getInstance(), ActorRef.noSender());
      client.actorSelection(base + path).tell(Kill.getInstance(), ActorRef.noSender());
      client.actorSelection(base + path).tell("not a request", ActorRef.noSender());
    }
    gateway.tell(PoisonPill.getInstance(), ActorRef.noSender());
    gateway.tell(Kill.getInstance(), ActorRef.noSender());
    gateway.tell("not a request", ActorRef.noSender());

    // Messages from one sender to one actor arrive in order: the gateway is alive after them and
    // ran no route for any of them.
    assertThat(ask()).isInstanceOf(ClientReply.Ok.class);
    assertThat(served).hasValue(2);
  }

  @Test
  void theGatewaySystemIsRemotingInUntrustedModeOnly() {
    Config c =
        GatewayEndpoint.config(
            ConfigFactory.load(),
            new GatewaySettings(true, "10.0.0.7", 25530, 8, Optional.empty()));
    assertThat(c.getString("pekko.actor.provider")).isEqualTo("remote");
    assertThat(c.getBoolean("pekko.remote.artery.untrusted-mode")).isTrue();
    assertThat(c.getStringList("pekko.remote.artery.trusted-selection-paths"))
        .containsExactly(ClientRequest.GATEWAY_PATH);
    assertThat(c.getString("pekko.remote.artery.transport")).isEqualTo("tcp");
    assertThat(c.getString("pekko.remote.artery.canonical.hostname")).isEqualTo("10.0.0.7");
    assertThat(c.getInt("pekko.remote.artery.canonical.port")).isEqualTo(25530);
    assertThat(c.getStringList("pekko.extensions")).isEmpty();
    assertThat(c.getString("pekko.loglevel")).isEqualTo("ERROR");
  }

  /**
   * {@code weir.protocol-gateway.tls}: a client with a certificate of the gateway's CA is served;
   * one whose certificate another CA issued gets no answer (its handshake fails). Errors in the
   * settings name the gateway's keys.
   */
  @Test
  void mutualTlsOnTheGatewayPort(@TempDir Path dir) throws Exception {
    TestCertificates certs = TestCertificates.in(dir);
    TestCertificates.Authority clients = certs.authority("gateway-clients");
    TestCertificates.Authority other = certs.authority("somebody-else");
    TestCertificates.Leaf server = certs.issue(clients, "gateway-node", List.of("ip:127.0.0.1"));
    TestCertificates.Leaf app = certs.issue(clients, "an-app", List.of("ip:127.0.0.1"));
    TestCertificates.Leaf stranger = certs.issue(other, "a-stranger", List.of("ip:127.0.0.1"));
    int port = TestPorts.free();
    Map<String, Object> tls = new java.util.HashMap<>();
    tls.put("weir.protocol-gateway.enabled", "on");
    tls.put("weir.protocol-gateway.host", "127.0.0.1");
    tls.put("weir.protocol-gateway.port", port);
    tls.put("weir.protocol-gateway.tls.key-store", server.keyStore().toString());
    tls.put("weir.protocol-gateway.tls.key-store-password", TestCertificates.PASSWORD);
    tls.put("weir.protocol-gateway.tls.trust-store", clients.trustStore().toString());
    tls.put("weir.protocol-gateway.tls.trust-store-password", TestCertificates.PASSWORD);
    GatewaySettings settings = GatewaySettings.create(gatewayConfig(tls));
    assertThat(settings.tls()).isPresent();
    assertThat(settings.tls().get().settings()).isEqualTo(ClusterTls.GATEWAY);

    Map<String, Object> incomplete = new java.util.HashMap<>(tls);
    incomplete.remove("weir.protocol-gateway.tls.key-store-password");
    assertThatThrownBy(() -> GatewaySettings.create(gatewayConfig(incomplete)))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> {
              assertThat(e.key()).isEqualTo("weir.protocol-gateway.tls.key-store-password");
              assertThat(e.getMessage()).contains("WEIR_GATEWAY_TLS_KEY_STORE_PASSWORD");
            });

    // The settings checked above name the first port to try; a lost bind takes another.
    int[] bound = {port, 0};
    GatewayEndpoint secured =
        TestPorts.bound(
            () -> bound[1]++ == 0 ? port : TestPorts.free(),
            p -> {
              bound[0] = p;
              Map<String, Object> at = new java.util.HashMap<>(tls);
              at.put("weir.protocol-gateway.port", p);
              return GatewayEndpoint.start(
                  node,
                  ConfigFactory.load(),
                  GatewaySettings.create(gatewayConfig(at)),
                  servedRoutes());
            });
    ActorSystem trusted = tlsClient("trusted-app", app, clients);
    ActorSystem untrusted = tlsClient("untrusted-app", stranger, other);
    try {
      String address = "pekko://" + ClientRequest.GATEWAY_SYSTEM + "@127.0.0.1:" + bound[0];
      assertThat(ask(trusted, address, Duration.ofSeconds(60))).isInstanceOf(ClientReply.Ok.class);
      int before = served.get();
      assertThatThrownBy(() -> ask(untrusted, address, Duration.ofSeconds(10)))
          .as("a certificate of another CA gets no answer")
          .hasRootCauseInstanceOf(org.apache.pekko.pattern.AskTimeoutException.class);
      assertThat(served).hasValue(before);
    } finally {
      trusted.terminate();
      untrusted.terminate();
      secured.closeAndWait(Duration.ofSeconds(30));
    }
  }

  private Route servedRoutes() {
    return Directives.extractRequest(
        request -> {
          served.incrementAndGet();
          return Directives.complete(
              HttpResponse.create().withEntity(ContentTypes.APPLICATION_JSON, "{\"served\":true}"));
        });
  }

  private static Config gatewayConfig(Map<String, Object> values) {
    return ConfigFactory.parseMap(values)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(com.typesafe.config.ConfigResolveOptions.noSystem());
  }

  private static ActorSystem tlsClient(
      String name, TestCertificates.Leaf leaf, TestCertificates.Authority ca) {
    Map<String, Object> c = new java.util.HashMap<>();
    c.put("pekko.actor.provider", "remote");
    c.put("pekko.remote.artery.transport", "tls-tcp");
    c.put("pekko.remote.artery.canonical.hostname", "127.0.0.1");
    c.put("pekko.remote.warn-about-direct-use", "off");
    c.put("pekko.coordinated-shutdown.run-by-jvm-shutdown-hook", "off");
    String engine = "pekko.remote.artery.ssl.config-ssl-engine.";
    c.put(engine + "key-store", leaf.keyStore().toString());
    c.put(engine + "key-store-password", TestCertificates.PASSWORD);
    c.put(engine + "key-password", TestCertificates.PASSWORD);
    c.put(engine + "trust-store", ca.trustStore().toString());
    c.put(engine + "trust-store-password", TestCertificates.PASSWORD);
    c.put(engine + "protocol", "TLSv1.3");
    c.put(
        engine + "enabled-algorithms", List.of("TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256"));
    return TestPorts.bound(
        port -> {
          c.put("pekko.remote.artery.canonical.port", port);
          return ActorSystem.create(
              name, ConfigFactory.parseMap(c).withFallback(ConfigFactory.load()));
        });
  }

  private static Object ask(ActorSystem from, String address, Duration timeout) throws Exception {
    return Patterns.ask(
            from.actorSelection(address + ClientRequest.GATEWAY_PATH),
            new ClientRequest.GetDocument(Credentials.bearer("t".repeat(20)), "c", "d"),
            timeout)
        .toCompletableFuture()
        .get(timeout.toSeconds() + 30, TimeUnit.SECONDS);
  }

  private Object ask() throws Exception {
    return Patterns.ask(
            client.actorSelection(base + ClientRequest.GATEWAY_PATH),
            new ClientRequest.GetDocument(Credentials.bearer("t".repeat(20)), "c", "d"),
            Duration.ofSeconds(60))
        .toCompletableFuture()
        .get(90, TimeUnit.SECONDS);
  }
}
