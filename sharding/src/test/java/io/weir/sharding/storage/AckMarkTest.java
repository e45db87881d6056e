package io.weir.sharding.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The order and merge of acknowledged marks, their check against a journal, and their encoding. */
class AckMarkTest {
  @Test
  void aHigherEpochWinsOverAHigherSequence() {
    AckMark old = new AckMark(0, "a", 1_000);
    AckMark accepted = new AckMark(1, "b", 10);
    assertThat(old.max(accepted)).isEqualTo(accepted);
    assertThat(accepted.max(old)).isEqualTo(accepted);
    assertThat(new AckMark(0, "a", 5).max(new AckMark(0, "a", 7)))
        .isEqualTo(new AckMark(0, "a", 7));
  }

  @Test
  void mergeIsCommutativeAssociativeAndIdempotent() {
    assertThat(MarkMap.EMPTY.raise(java.util.Map.of(1, new AckMark(0, "a", 3))).mark(1).sequence())
        .isEqualTo(3);
    Random random = new Random(7);
    List<MarkMap> registers = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      java.util.Map<Integer, AckMark> m = new java.util.HashMap<>();
      for (int p = random.nextInt(4); p > 0; p--) {
        m.put(
            random.nextInt(3),
            new AckMark(
                random.nextInt(3),
                random.nextBoolean() ? null : "i" + random.nextInt(3),
                random.nextInt(5)));
      }
      registers.add(new MarkMap(m));
    }
    for (MarkMap a : registers) {
      assertThat(a.merge(a)).isEqualTo(a);
      for (MarkMap b : registers) {
        assertThat(a.merge(b)).isEqualTo(b.merge(a));
        for (MarkMap c : registers) {
          assertThat(a.merge(b).merge(c)).isEqualTo(a.merge(b.merge(c)));
        }
      }
    }
  }

  @Test
  void aJournalIsBehindWhenItLacksTheSequenceOrTheIncarnation() {
    AckMark mark = new AckMark(0, "inc-1", 12);
    assertThat(mark.aheadOf("inc-1", 12)).isFalse();
    assertThat(mark.aheadOf("inc-1", 13)).as("written, not yet marked").isFalse();
    assertThat(mark.aheadOf("inc-1", 11)).isTrue();
    assertThat(mark.aheadOf("inc-0", 40)).as("another incarnation: the journal lost ours").isTrue();
    assertThat(mark.aheadOf(null, 0)).as("the journal lost the whole partition").isTrue();
    assertThat(AckMark.NONE.aheadOf(null, 0)).isFalse();
    assertThat(AckMark.NONE.aheadOf("inc-1", 3)).as("nothing acknowledged yet").isFalse();
  }

  @Test
  void negativeNumbersAreRefused() {
    assertThatThrownBy(() -> new AckMark(-1, "a", 1)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new AckMark(0, "a", -1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theEncodingRoundTripsAndRefusesCorruptBytes() throws Exception {
    MarkMapSerializer s = new MarkMapSerializer();
    MarkMap map =
        new MarkMap(
            java.util.Map.of(
                0,
                AckMark.NONE,
                511,
                new AckMark(3, "4b9f-inc", Long.MAX_VALUE),
                7,
                new AckMark(0, "x", 1),
                9,
                new AckMark(2, "y", 40, new io.weir.persistence.StorageSystem(-7L, 3))));
    assertThat(s.fromBinary(s.toBinary(map), s.manifest(map))).isEqualTo(map);
    assertThat(s.fromBinary(s.toBinary(MarkMap.EMPTY), "M")).isEqualTo(MarkMap.EMPTY);
    byte[] good =
        s.toBinary(new MarkMap(java.util.Map.of(2, new AckMark(1, "secret-incarnation", 9))));
    byte[] truncated = java.util.Arrays.copyOf(good, good.length - 3);
    assertThatThrownBy(() -> s.fromBinary(truncated, "M"))
        .isInstanceOf(java.io.NotSerializableException.class)
        .hasMessageNotContaining("secret");
    byte[] longer = java.util.Arrays.copyOf(good, good.length + 1);
    assertThatThrownBy(() -> s.fromBinary(longer, "M")).hasMessageContaining("trailing");
    assertThatThrownBy(() -> s.fromBinary(good, "X")).hasMessageContaining("manifest");
    assertThat(new AckMark(1, "secret-incarnation", 9).toString()).doesNotContain("secret");
  }

  @Test
  void marksWrittenBeforeStoragesWereRecordedAreStillRead() throws Exception {
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
    try (java.io.DataOutputStream out = new java.io.DataOutputStream(bytes)) {
      out.writeByte(1); // format 1: no storage per entry
      out.writeInt(1);
      out.writeInt(4);
      out.writeLong(2);
      out.writeLong(17);
      out.writeBoolean(true);
      out.writeUTF("inc");
    }
    assertThat(new MarkMapSerializer().fromBinary(bytes.toByteArray(), "M"))
        .isEqualTo(new MarkMap(java.util.Map.of(4, new AckMark(2, "inc", 17))));
  }

  @Test
  void marksThatDifferOnlyInTheirStorageMergeTheSameWayOnEveryReplica() {
    AckMark one = new AckMark(0, "a", 5, new io.weir.persistence.StorageSystem(11, 1));
    AckMark two = new AckMark(0, "a", 5, new io.weir.persistence.StorageSystem(11, 2));
    AckMark unknown = new AckMark(0, "a", 5);
    assertThat(one.max(two)).isEqualTo(two.max(one)).isEqualTo(two);
    assertThat(unknown.max(one)).isEqualTo(one.max(unknown)).isEqualTo(one);
    assertThat(one.aheadOf("a", 5)).as("the sequence decides, not the storage").isFalse();
    assertThat(two.toString()).contains("timeline 2");
  }
}
