package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPorts;
import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import io.weir.protocol.client.Credentials;
import io.weir.sharding.partition.PartitionProtocol;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.AddressFromURIString;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.pattern.Patterns;

/**
 * A protocol client cannot bypass the gateway (ADR 0028). Run against a live cluster by {@link
 * ThreeNodeClusterIT}:
 *
 * <ul>
 *   <li>a process that holds what a client holds (the gateway addresses) builds partition commands
 *       itself, with the reply address forged to a server node's, and sends them to every path it
 *       can name on every gateway port, by selection and by reference; the gateway still answers
 *       it, and none of the commands took effect: no forged document exists and governed reads of
 *       the collection whose row rule it tried to raise to {@code Long.MAX_VALUE} still answer;
 *   <li>a client configured the old way, as a cluster member with the role {@code client}, is
 *       refused when it joins through the seed nodes and downed when it joins by address; either
 *       way its actor system stops and the cluster keeps its server members.
 * </ul>
 */
final class GatewayBypass {
  /** Governed by a row rule the forged SetRowRule tries to raise. */
  private static final String COLLECTION = "forged";

  /** Without a policy, so a forged document would be visible to the administrator's read. */
  private static final String WRITTEN = "bypass";

  private static final int PARTITIONS = 64;
  private static final String REGION = "/system/sharding/weir-partition";

  private GatewayBypass() {}

  static void clientsCannotBypassTheGateway(
      List<NodeProcess> nodes, String seeds, List<String> gateways) throws Exception {
    NodeProcess admin = nodes.get(0);
    Set<String> servers = admin.memberStatusesNow().keySet();
    // A governed collection: a partition whose row rule is ahead of the policy answers 503.
    assertThat(
            admin
                .sendIdempotent(
                    "PUT",
                    "/admin/policies/" + COLLECTION,
                    "{\"visibility\":\"owner\",\"field\":\"owner\"}",
                    Map.of("Content-Type", "application/json"))
                .statusCode())
        .isEqualTo(200);
    await("the policy answers reads on every node")
        .atMost(Duration.ofSeconds(120))
        .until(
            () ->
                nodes.stream()
                    .allMatch(
                        n ->
                            n.sendIdempotent(
                                        "GET",
                                        "/v1/documents/" + COLLECTION + "/probe",
                                        null,
                                        Map.of())
                                    .statusCode()
                                == 404));

    ActorSystem attacker =
        TestPorts.bound(port -> ActorSystem.create("attacker", remoteOnly(port)));
    int sent = 0;
    try {
      ExtendedActorSystem ext = (ExtendedActorSystem) attacker;
      // Forged: the reply address is a server's, as if a node had sent the command.
      Address server = AddressFromURIString.parse(servers.iterator().next());
      org.apache.pekko.actor.typed.ActorRef<PartitionProtocol.FrameReply> frameReply =
          Adapter.toTyped(ext.provider().resolveActorRef(server + "/user/weir-replies"));
      org.apache.pekko.actor.typed.ActorRef<PartitionProtocol.RowRuleReply> ruleReply =
          Adapter.toTyped(ext.provider().resolveActorRef(server + "/user/weir-replies"));
      for (String gateway : gateways) {
        String base = "pekko://" + ClientRequest.GATEWAY_SYSTEM + "@" + gateway;
        List<String> paths =
            List.of(REGION, REGION + "/0", ClientRequest.GATEWAY_PATH, "/user", "/system", "");
        for (int n = 0; n < PARTITIONS; n++) {
          List<Object> commands =
              List.of(
                  new PartitionProtocol.ApplyFrame(
                      "forged-" + n,
                      List.of(
                          new PartitionProtocol.Upsert(
                              WRITTEN, "pwned-" + n, "{\"owner\":\"attacker\"}", Optional.empty())),
                      Optional.empty(),
                      frameReply),
                  new PartitionProtocol.SetRowRule(COLLECTION, "owner", Long.MAX_VALUE, ruleReply));
          for (Object command : commands) {
            Object enveloped = new ShardingEnvelope<>(Integer.toString(n), command);
            for (String path : paths) {
              attacker.actorSelection(base + path).tell(enveloped, ActorRef.noSender());
              attacker.actorSelection(base + path).tell(command, ActorRef.noSender());
              ext.provider().resolveActorRef(base + path).tell(enveloped, ActorRef.noSender());
              sent += 3;
            }
          }
        }
        // The gateway still serves this process: a client's request, with an administrator's
        // token, is answered (the forged document does not exist).
        Object answer =
            Patterns.ask(
                    attacker.actorSelection(base + ClientRequest.GATEWAY_PATH),
                    new ClientRequest.GetDocument(
                        Credentials.bearer(NodeProcess.ADMIN_TOKEN), WRITTEN, "pwned-0"),
                    Duration.ofSeconds(60))
                .toCompletableFuture()
                .get(90, TimeUnit.SECONDS);
        assertThat(answer)
            .as("the gateway answers after the forged commands")
            .isInstanceOfSatisfying(
                ClientReply.Failed.class, f -> assertThat(f.status()).isEqualTo(404));
      }
    } finally {
      attacker.terminate();
      attacker.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
    // Nothing changed: no forged document on any partition, the row rule as the policy set it.
    List<Integer> statuses = new ArrayList<>();
    for (int n = 0; n < PARTITIONS; n++) {
      statuses.add(
          nodes
              .get(n % nodes.size())
              .sendIdempotent("GET", "/v1/documents/" + WRITTEN + "/pwned-" + n, null, Map.of())
              .statusCode());
    }
    assertThat(statuses).as("GET of each forged document").containsOnly(404);
    for (NodeProcess n : nodes) {
      assertThat(
              n.sendIdempotent("GET", "/v1/documents/" + COLLECTION + "/probe", null, Map.of())
                  .statusCode())
          .as("a governed read after the forged row rule")
          .isEqualTo(404);
    }
    System.out.printf(
        "gateway-bypass: %d forged partition commands sent to %d gateway ports; 0 took effect"
            + " (%d forged documents absent, governed reads answer)%n",
        sent, gateways.size(), PARTITIONS);

    // A client configured the old way: a member with the role client.
    List<Address> seedAddresses = new ArrayList<>();
    for (String seed : seeds.split(",")) {
      seedAddresses.add(AddressFromURIString.parse("pekko://weir@" + seed));
    }
    ActorSystem bySeeds = TestPorts.bound(port -> ActorSystem.create("weir", asClientMember(port)));
    Cluster.get(bySeeds).joinSeedNodes(seedAddresses);
    assertThat(bySeeds.getWhenTerminated().toCompletableFuture().get(180, TimeUnit.SECONDS))
        .as("a member with the role client, joining through the seed nodes, is refused and stops")
        .isNotNull();
    await("a seed node logged the refusal")
        .atMost(Duration.ofSeconds(60))
        .until(
            () ->
                nodes.stream()
                    .anyMatch(n -> n.log().contains("a Weir cluster has server members only")));
    ActorSystem byAddress =
        TestPorts.bound(port -> ActorSystem.create("weir", asClientMember(port)));
    Cluster.get(byAddress).join(seedAddresses.get(0));
    assertThat(byAddress.getWhenTerminated().toCompletableFuture().get(180, TimeUnit.SECONDS))
        .as("a member with the role client, joining by address, is downed and stops")
        .isNotNull();
    await("a server logged that it downed the member")
        .atMost(Duration.ofSeconds(60))
        .until(
            () ->
                nodes.stream()
                    .anyMatch(
                        n ->
                            n.log()
                                .contains(
                                    "a member without the server role joined the cluster;"
                                        + " downing it")));
    await("the cluster has its server members only")
        .atMost(Duration.ofSeconds(120))
        .until(
            () ->
                nodes.stream()
                    .allMatch(
                        n -> {
                          Map<String, String> m = n.memberStatusesNow();
                          return m.keySet().equals(servers)
                              && m.values().stream().allMatch("up"::equals);
                        }));
    System.out.println(
        "gateway-bypass: a member with the role client is refused at join (seed nodes) and downed"
            + " (join by address); the cluster kept its 3 server members");
  }

  private static Config remoteOnly(int port) {
    return ConfigFactory.parseMap(
            Map.of(
                "pekko.actor.provider", "remote",
                "pekko.remote.artery.canonical.hostname", "127.0.0.1",
                "pekko.remote.artery.canonical.port", port,
                "pekko.remote.warn-about-direct-use", "off",
                "pekko.coordinated-shutdown.run-by-jvm-shutdown-hook", "off"))
        .withFallback(ConfigFactory.load());
  }

  private static Config asClientMember(int port) {
    return ConfigFactory.parseMap(
            Map.of(
                "pekko.actor.provider", "cluster",
                "pekko.cluster.roles", List.of("client"),
                "pekko.remote.artery.canonical.hostname", "127.0.0.1",
                "pekko.remote.artery.canonical.port", port,
                "pekko.coordinated-shutdown.run-by-jvm-shutdown-hook", "off"))
        .withFallback(ConfigFactory.load());
  }
}
