package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.weir.persistence.serialization.SerializationFixtures;
import io.weir.sharding.partition.ConsumerProtocol.BatchReceipt;
import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.PartProgress;
import io.weir.sharding.partition.Partition.RowRule;
import io.weir.sharding.partition.Partition.Segment;
import java.io.NotSerializableException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Random;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.serialization.SerializationExtension;
import org.junit.jupiter.api.Test;

/**
 * The partition's snapshot encoding ({@link PartitionSnapshotSerializer}, ADR 0032): bound to the
 * state, round-trips random states exactly, still decodes the stored bytes of its format 1, refuses
 * corrupt input without a value in its message, and takes a few bytes per document whatever the
 * body size.
 */
class PartitionSnapshotSerializerTest {
  private static final PartitionSnapshotSerializer SERIALIZER = new PartitionSnapshotSerializer();
  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private static Path fixture(int format) {
    return Path.of(System.getProperty("basedir", "."))
        .resolve("src/test/resources/serialization/partition-snapshots/format-" + format + ".json");
  }

  @Test
  void theStateIsBoundToIt() {
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "snapshot-serializer");
    try {
      assertThat(
              SerializationExtension.get(system)
                  .findSerializerFor(PartitionState.empty())
                  .identifier())
          .isEqualTo(PartitionSnapshotSerializer.IDENTIFIER);
    } finally {
      system.terminate();
    }
  }

  @Test
  void randomStatesRoundTripExactly() throws Exception {
    long seed = Long.getLong("weir.serializer.seed", System.nanoTime());
    Random random = new Random(seed);
    for (int i = 0; i < 200; i++) {
      PartitionState s = random(random);
      byte[] bytes = SERIALIZER.toBinary(s);
      Object back = SERIALIZER.fromBinary(bytes, SERIALIZER.manifest(s));
      assertThat(back).as("seed " + seed + ", state " + i).isEqualTo(s);
      assertThat(SERIALIZER.toBinary(back)).isEqualTo(bytes);
    }
  }

  @Test
  void theStoredBytesOfFormat1StillDecode() throws Exception {
    PartitionState expected = every();
    expected.cuts.clear(); // format 1 had none
    stored(1, expected);
  }

  @Test
  void theStoredBytesOfFormat2StillDecode() throws Exception {
    stored(2, every());
  }

  @Test
  void theStoredBytesOfFormat3StillDecode() throws Exception {
    stored(3, every());
  }

  private static void stored(int format, PartitionState expected) throws Exception {
    Path fixture = fixture(format);
    if (!Files.exists(fixture)) {
      if (format != PartitionSnapshotSerializer.FORMAT) {
        fail("no snapshot fixture " + fixture);
      }
      if (!SerializationFixtures.writing()) {
        fail(
            "no snapshot fixture "
                + fixture
                + "; write it with -D"
                + SerializationFixtures.WRITE_PROPERTY
                + "=true (and commit it)");
      }
      Files.createDirectories(fixture.getParent());
      Files.writeString(
          fixture,
          JSON.writeValueAsString(
                  JSON.createObjectNode()
                      .put("manifest", PartitionSnapshotSerializer.MANIFEST)
                      .put(
                          "payload",
                          Base64.getEncoder().encodeToString(SERIALIZER.toBinary(expected))))
              + "\n");
    }
    JsonNode stored = JSON.readTree(fixture.toFile());
    Object decoded =
        SERIALIZER.fromBinary(
            Base64.getDecoder().decode(stored.get("payload").asText()),
            stored.get("manifest").asText());
    if (format < 3) {
      // Receipts had no time before format 3: they count as written when read.
      PartitionState d = (PartitionState) decoded;
      assertThat(d.receipts.keySet()).containsExactlyElementsOf(expected.receipts.keySet());
      assertThat(d.receipts.values()).allMatch(r -> r.atMillis() > 1_700_000_000_000L);
      assertThat(d.receiptsSpilledAt).isZero();
      untimed(d);
      untimed(expected);
    }
    assertThat(decoded).isEqualTo(expected);
  }

  /** The state with every receipt's time, and its receipt marks, at 0. */
  private static void untimed(PartitionState s) {
    s.receipts.replaceAll(
        (k, r) -> new Receipt(r.commandId(), r.firstSequence(), r.revisions(), 0));
    s.receiptsSpilledAt = 0;
    s.receiptsLatestAt = 0;
  }

  @Test
  void corruptInputIsRefusedWithoutItsValues() {
    byte[] bytes = SERIALIZER.toBinary(every());
    String manifest = PartitionSnapshotSerializer.MANIFEST;
    for (int cut = 1; cut < bytes.length; cut += Math.max(1, bytes.length / 50)) {
      byte[] truncated = Arrays.copyOf(bytes, cut);
      assertThatThrownBy(() -> SERIALIZER.fromBinary(truncated, manifest))
          .isInstanceOf(NotSerializableException.class)
          .hasMessageNotContaining("secret");
    }
    byte[] longer = Arrays.copyOf(bytes, bytes.length + 1);
    assertThatThrownBy(() -> SERIALIZER.fromBinary(longer, manifest))
        .isInstanceOf(NotSerializableException.class)
        .hasMessageContaining("trailing");
    byte[] future = bytes.clone();
    future[0] = (byte) (PartitionSnapshotSerializer.FORMAT + 1);
    assertThatThrownBy(() -> SERIALIZER.fromBinary(future, manifest))
        .isInstanceOf(NotSerializableException.class)
        .hasMessageContaining("format " + (PartitionSnapshotSerializer.FORMAT + 1));
  }

  @Test
  void aDocumentTakesAFewBytesWhateverItsBodySize() {
    PartitionState s = PartitionState.empty();
    int n = 10_000;
    for (int i = 0; i < n; i++) {
      s.index.put(
          "bench", Integer.toString(1_000_000 + i), new DocumentIndex.Entry(3, 20_000 + i, 1_024));
    }
    s.events = 40_000;
    long perDocument = SERIALIZER.toBinary(s).length / n;
    assertThat(perDocument).as("bytes per document, 7-digit ids, 1 KB bodies").isLessThan(24);
  }

  /** A state with every part set, stable for the stored fixture. */
  private static PartitionState every() {
    PartitionState s = PartitionState.empty();
    s.nextSequence = 1_207;
    s.outboxFirst = 1_001;
    s.outboxBytes = 12_345;
    s.events = 1_500;
    s.incarnation = "incarnation-1";
    s.eventBytes = 987_654;
    s.mark.events = 1_000;
    s.mark.eventBytes = 900_000;
    s.receipts.put("api2:key-1", new Receipt("api2:key-1:request", 1_100, List.of(3L, 0L), 7_000));
    s.receipts.put("cmd-2", new Receipt("cmd-2", 1_105, List.of(1L), 7_001));
    s.receiptsSpilledAt = 6_000;
    s.receiptsLatestAt = 7_001;
    s.watermarks.put("slot-a|inc", 0x1_0000_0000L);
    s.partials.put("slot-b|inc", new PartProgress(5_000, 1));
    s.cuts.put("slot-b|inc", new Partition.Cut(3, "k-9"));
    s.outbox.append(1_001L, new Segment(1_401, 4, 800));
    s.outbox.append(1_005L, new Segment(1_402, 202, 11_545));
    s.consumers.put(
        Partition.consumerKey("proj", 1),
        new Consumer(
            "proj",
            1,
            List.of("orders"),
            List.of("upsert"),
            1_000,
            1_104,
            false,
            1_001,
            List.of(new BatchReceipt(1_100, 1_104, "digest", "commit-1", 1_105, List.of(2L), 7L))));
    s.rules.put("orders", new RowRule("owner", 2));
    s.rowEpochs.put("orders", 3L);
    s.index.put("orders", "o-1", new DocumentIndex.Entry(4, 1_499, 27));
    s.index.put("orders", "o-2", new DocumentIndex.Entry(2, 1_200, -1));
    s.index.put("customers", "日本-𝄞", new DocumentIndex.Entry(1, 1_000, 1_024));
    return s;
  }

  private static PartitionState random(Random r) {
    PartitionState s = PartitionState.empty();
    s.events = 1 + r.nextInt(1_000_000);
    s.nextSequence = 1 + r.nextInt(1_000_000);
    s.outboxFirst = 1 + r.nextInt(1_000);
    s.outboxBytes = r.nextInt(1 << 30);
    s.incarnation = r.nextBoolean() ? null : "inc-" + r.nextInt(9);
    s.eventBytes = r.nextLong() & Long.MAX_VALUE;
    s.receiptsSpilledAt = r.nextInt(1 << 20);
    s.receiptsLatestAt = r.nextInt(1 << 20);
    s.mark.events = r.nextInt(1_000);
    s.mark.eventBytes = r.nextInt(1 << 20);
    for (int i = r.nextInt(5); i > 0; i--) {
      s.receipts.put(
          "k" + i, new Receipt("c" + i, r.nextInt(1000), List.of((long) i), r.nextLong()));
    }
    for (int i = r.nextInt(3); i > 0; i--) {
      s.watermarks.put("slot" + i, r.nextLong());
    }
    for (int i = r.nextInt(3); i > 0; i--) {
      s.partials.put("slot" + i, new PartProgress(r.nextLong(), r.nextInt(9)));
      if (r.nextBoolean()) {
        s.cuts.put("slot" + i, new Partition.Cut(r.nextInt(99), r.nextBoolean() ? null : "k" + i));
      }
    }
    for (int i = 1, n = r.nextInt(4); i <= n; i++) {
      s.outbox.append((long) i * 10, new Segment(i, i, i * 100L));
    }
    for (int i = r.nextInt(3); i > 0; i--) {
      s.rules.put("c" + i, new RowRule(r.nextBoolean() ? null : "f" + i, i));
      s.rowEpochs.put("c" + i, (long) r.nextInt(5));
    }
    String[] collections = {"orders", "notes", "日本"};
    for (int i = r.nextInt(50); i > 0; i--) {
      String id =
          r.nextBoolean()
              ? Integer.toString(r.nextInt(100))
              : "id-" + (char) (0x3000 + r.nextInt(64));
      long lastSeq = r.nextInt((int) Math.min(s.events, Integer.MAX_VALUE)) + 1;
      s.index.put(
          collections[r.nextInt(3)],
          id,
          new DocumentIndex.Entry(
              1 + r.nextInt(100), lastSeq, r.nextBoolean() ? -1 : r.nextInt(1 << 20)));
    }
    return s;
  }
}
