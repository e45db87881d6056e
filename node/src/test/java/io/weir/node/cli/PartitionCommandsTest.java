package io.weir.node.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

/** The timeline and table-lag columns of {@code weir ctl partitions status}. */
class PartitionCommandsTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void theTimelineShowsWhereAMarkWasAcknowledgedWhenThatDiffers() throws Exception {
    assertThat(
            PartitionCommands.timelines(
                JSON.readTree(
                    "{\"checkedOn\":{\"systemIdentifier\":\"1\",\"timeline\":4},"
                        + "\"acknowledgedOn\":{\"systemIdentifier\":\"1\",\"timeline\":3}}")))
        .isEqualTo("4 (ack 3)");
    assertThat(
            PartitionCommands.timelines(
                JSON.readTree(
                    "{\"checkedOn\":{\"systemIdentifier\":\"1\",\"timeline\":2},"
                        + "\"acknowledgedOn\":{\"systemIdentifier\":\"1\",\"timeline\":2}}")))
        .isEqualTo("2");
    assertThat(PartitionCommands.timelines(JSON.readTree("{\"checkedOn\":null}"))).isEqualTo("-");
    assertThat(
            PartitionCommands.timelines(
                JSON.readTree("{\"acknowledgedOn\":{\"systemIdentifier\":\"1\",\"timeline\":2}}")))
        .isEqualTo("- (ack 2)");
  }

  @Test
  void theTableLagShowsEventsAndTheirBytes() throws Exception {
    assertThat(PartitionCommands.tableLag(JSON.readTree("{\"lagEvents\":0,\"lagBytes\":0}")))
        .isEqualTo("0 (0 B)");
    assertThat(PartitionCommands.tableLag(JSON.readTree("{\"lagEvents\":12,\"lagBytes\":3174}")))
        .isEqualTo("12 (3.1 KiB)");
    assertThat(
            PartitionCommands.tableLag(JSON.readTree("{\"lagEvents\":1001,\"lagBytes\":70254592}")))
        .isEqualTo("1001 (67.0 MiB)");
    assertThat(PartitionCommands.tableLag(JSON.readTree("null"))).isEqualTo("-");
  }
}
