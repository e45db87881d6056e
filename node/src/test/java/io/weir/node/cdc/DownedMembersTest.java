package io.weir.node.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.cdc.source.SlotHolders;
import io.weir.persistence.testing.TestPorts;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.StreamSupport;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Down;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.cluster.typed.Leave;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Which holders a pipeline may end (ADR 0037), against a real four-member cluster in this JVM: a
 * member the cluster downed is listed once removed; one that left gracefully, one that is still a
 * member (however slow), and this member itself never are.
 */
class DownedMembersTest {
  private static final Duration WAIT = Duration.ofSeconds(60);

  private final List<ActorTestKit> kits = new ArrayList<>();

  @AfterEach
  void stop() {
    kits.forEach(ActorTestKit::shutdownTestKit);
  }

  @Test
  void onlyMembersRemovedAfterTheirDowningAreListed() {
    ActorSystem<Void> a = member("a");
    Cluster first = Cluster.get(a);
    first.manager().tell(Join.create(first.selfMember().address()));
    ActorSystem<Void> b = member("b");
    ActorSystem<Void> c = member("c");
    ActorSystem<Void> d = member("d");
    for (ActorSystem<Void> s : List.of(b, c, d)) {
      Cluster.get(s).manager().tell(Join.create(first.selfMember().address()));
    }
    await("four members up")
        .atMost(WAIT)
        .until(
            () ->
                countUp(first) == 4
                    && List.of(b, c, d).stream().allMatch(s -> countUp(Cluster.get(s)) == 4));
    SlotHolders holders = DownedMembers.start(a).holders();

    String downed = id(c);
    String left = id(b);
    String stays = id(d);
    first.manager().tell(new Leave(Cluster.get(b).selfMember().address()));
    first.manager().tell(new Down(Cluster.get(c).selfMember().address()));
    await("the left and the downed member removed")
        .atMost(WAIT)
        .until(() -> countMembers(first) == 2);
    await("the downed member listed").atMost(WAIT).until(() -> holders.downed().test(downed));

    assertThat(holders.downed().test(left)).as("a member that left gracefully").isFalse();
    assertThat(holders.downed().test(stays)).as("a member still in the cluster").isFalse();
    assertThat(holders.downed().test(id(a))).as("this member").isFalse();
    assertThat(holders.self()).isEqualTo(id(a));
    assertThat(holders.applicationName()).isEqualTo("weir-replication " + id(a));
  }

  private ActorSystem<Void> member(String name) {
    Config config =
        ConfigFactory.parseString(
            "pekko.actor.provider = cluster\n"
                + "pekko.cluster.downing-provider-class = \"\"\n"
                + "pekko.cluster.jmx.multi-mbeans-in-same-jvm = on\n"
                + "pekko.coordinated-shutdown.exit-jvm = off\n"
                + "pekko.coordinated-shutdown.terminate-actor-system = on\n");
    ActorTestKit kit = TestPorts.kit("weir", config);
    kits.add(kit);
    return kit.system();
  }

  private static String id(ActorSystem<?> system) {
    return Long.toUnsignedString(Cluster.get(system).selfMember().uniqueAddress().longUid());
  }

  private static long countUp(Cluster cluster) {
    return StreamSupport.stream(cluster.state().getMembers().spliterator(), false)
        .filter(m -> m.status() == MemberStatus.up())
        .count();
  }

  private static long countMembers(Cluster cluster) {
    return StreamSupport.stream(cluster.state().getMembers().spliterator(), false).count();
  }
}
