package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPorts;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorRefResolver;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

class ServerOriginTest {
  private static final ActorTestKit kit =
      TestPorts.kit("weir", ConfigFactory.parseString("pekko.actor.provider = cluster"));

  @AfterAll
  static void stop() {
    kit.shutdownTestKit();
  }

  record NoReply(String what) {}

  @Test
  void onlyRemoteReplyAddressesOfNonServersAreRefused() {
    ActorRef<StatusProtocol.PartitionStatus> local =
        kit.createTestProbe(StatusProtocol.PartitionStatus.class).getRef();
    ActorRef<StatusProtocol.PartitionStatus> remote =
        ActorRefResolver.get(kit.system()).resolveActorRef("pekko://weir@10.9.8.7:25520/temp/$a");
    List<Address> asked = new ArrayList<>();

    assertThat(
            ServerOrigin.accepted(
                new StatusProtocol.GetStatus(local),
                a -> {
                  asked.add(a);
                  return false;
                }))
        .as("a reply to this node is always accepted")
        .isTrue();
    assertThat(asked).as("a local reply address needs no membership check").isEmpty();

    assertThat(ServerOrigin.accepted(new StatusProtocol.GetStatus(remote), a -> true)).isTrue();
    assertThat(
            ServerOrigin.accepted(
                new StatusProtocol.GetStatus(remote),
                a -> {
                  asked.add(a);
                  return false;
                }))
        .as("a reply to a member without the server role")
        .isFalse();
    assertThat(asked).extracting(Address::toString).containsExactly("pekko://weir@10.9.8.7:25520");

    ActorRef<PartitionProtocol.PurgeReply> remotePurge =
        ActorRefResolver.get(kit.system()).resolveActorRef("pekko://weir@10.9.8.7:25520/temp/$b");
    assertThat(
            ServerOrigin.accepted(
                new PartitionProtocol.PurgeOutbox(10, 10, remotePurge), a -> false))
        .as("an internal purge from a client")
        .isFalse();
    assertThat(ServerOrigin.accepted(new NoReply("x"), a -> false))
        .as("a message without a reply address")
        .isTrue();
  }
}
