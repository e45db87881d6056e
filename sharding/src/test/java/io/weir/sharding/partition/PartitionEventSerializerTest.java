package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.serialization.SerializationFixtures;
import io.weir.sharding.partition.ConsumerProtocol.BatchReceipt;
import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.FrameApplied;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.Partition.Purged;
import io.weir.sharding.partition.Partition.RuleChange;
import io.weir.sharding.partition.Partition.Written;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.io.NotSerializableException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializers;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The hand-written journal encoding of partition events ({@link PartitionEventSerializer}): it is
 * the one bound to them, round-trips random events exactly, still decodes the stored bytes of its
 * format 1, rejects corrupt input with a value-free error, and is smaller than Jackson CBOR for a
 * CDC event.
 */
class PartitionEventSerializerTest {
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(PartitionEventSerializerTest.class);
  private static final PartitionEventSerializer SERIALIZER = new PartitionEventSerializer();
  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
  private static ActorSystem<Void> system;
  private static Serialization serialization;

  @BeforeAll
  static void start() {
    system = ActorSystem.create(Behaviors.empty(), "event-serializer");
    serialization = SerializationExtension.get(system);
  }

  @AfterAll
  static void stop() {
    system.terminate();
  }

  @Test
  void partitionEventsAreBoundToItAndOtherMessagesAreNot() {
    assertThat(serialization.findSerializerFor(new Purged(3)).identifier())
        .isEqualTo(PartitionEventSerializer.IDENTIFIER);
    assertThat(serialization.findSerializerFor(everyField()).identifier())
        .isEqualTo(PartitionEventSerializer.IDENTIFIER);
    assertThat(serialization.findSerializerFor(new Partition.RowRule("f", 1)).identifier())
        .isNotEqualTo(PartitionEventSerializer.IDENTIFIER);
  }

  @Test
  void randomEventsRoundTripExactly() throws Exception {
    long seed = Long.getLong("weir.serializer.seed", System.nanoTime());
    Random random = new Random(seed);
    for (int i = 0; i < 2_000; i++) {
      Written w = randomWritten(random);
      byte[] bytes = SERIALIZER.toBinary(w);
      Object back = SERIALIZER.fromBinary(bytes, SERIALIZER.manifest(w));
      assertThat(back).as("event " + i + " of seed " + seed).isEqualTo(w);
      assertThat(SERIALIZER.toBinary(back)).as("stable bytes, seed " + seed).isEqualTo(bytes);
    }
    Purged p = new Purged(-7);
    assertThat(SERIALIZER.fromBinary(SERIALIZER.toBinary(p), SERIALIZER.manifest(p))).isEqualTo(p);
  }

  @Test
  void theStoredBytesOfFormat1StillDecode() throws Exception {
    stored(1, List.of(everyField(), cdcEvent(3), new Purged(12_345)));
  }

  /** Format 2 (ADR 0033) adds where a frame written in parts goes on. */
  @Test
  void theStoredBytesOfFormat2StillDecode() throws Exception {
    stored(2, List.of(everyField(), partOfATruncate(), new Purged(12_346)));
  }

  /** Decodes the stored samples of {@code format}, writing them first when the run may. */
  private static void stored(int format, List<Object> expected) throws Exception {
    Path file =
        Path.of(System.getProperty("basedir", "."))
            .resolve(
                "src/test/resources/serialization/partition-events/format-" + format + ".json");
    if (!Files.exists(file)) {
      if (!SerializationFixtures.writing() || format != PartitionEventSerializer.FORMAT) {
        fail(
            "no fixture "
                + file
                + "; write the current format's with -D"
                + SerializationFixtures.WRITE_PROPERTY
                + "=true and commit it");
      }
      ObjectNode root = JSON.createObjectNode();
      var samples = root.putArray("samples");
      for (Object o : expected) {
        samples
            .addObject()
            .put("manifest", SERIALIZER.manifest(o))
            .put("payload", Base64.getEncoder().encodeToString(SERIALIZER.toBinary(o)));
      }
      Files.createDirectories(file.getParent());
      JSON.writeValue(file.toFile(), root);
    }
    JsonNode stored = JSON.readTree(file.toFile()).get("samples");
    assertThat(stored).hasSize(expected.size());
    for (int i = 0; i < expected.size(); i++) {
      JsonNode s = stored.get(i);
      byte[] payload = Base64.getDecoder().decode(s.get("payload").asText());
      assertThat(payload[0]).as("the sample's format").isEqualTo((byte) format);
      // Through the serialization extension, as the journal plugin decodes a stored row.
      Object decoded =
          serialization
              .deserialize(payload, PartitionEventSerializer.IDENTIFIER, s.get("manifest").asText())
              .get();
      assertThat(decoded).as("stored sample " + i).isEqualTo(expected.get(i));
    }
  }

  /** A part of a CDC frame whose truncate goes on after an id. */
  static Written partOfATruncate() {
    return new Written(
        null,
        List.of(
            new FrameApplied(
                null,
                List.of(
                    new OutboxEntry(
                        2_001, 0, "public.t", "k-9", "delete", 3, "{\"a\":9}", null, 7, 0x5000L)),
                Optional.of(new SourcePosition("slot-a", 0x5000L, 0x4000L, 1, true)),
                List.of(),
                List.of(),
                null,
                List.of(),
                null,
                new Partition.Cut(2, "k-9"))));
  }

  @Test
  void corruptInputIsRefusedWithoutItsValues() {
    Written w = everyField();
    byte[] bytes = SERIALIZER.toBinary(w);
    String manifest = SERIALIZER.manifest(w);
    for (int cut = 0; cut < bytes.length; cut++) {
      byte[] truncated = Arrays.copyOf(bytes, cut);
      assertThatThrownBy(() -> SERIALIZER.fromBinary(truncated, manifest))
          .isInstanceOf(NotSerializableException.class)
          .satisfies(
              e -> assertThat(e.getMessage()).doesNotContain("secret").doesNotContain("alice"));
    }
    byte[] longer = Arrays.copyOf(bytes, bytes.length + 1);
    assertThatThrownBy(() -> SERIALIZER.fromBinary(longer, manifest))
        .hasMessageContaining("trailing");
    byte[] future = bytes.clone();
    future[0] = 9;
    assertThatThrownBy(() -> SERIALIZER.fromBinary(future, manifest))
        .hasMessageContaining("format 9");
    assertThatThrownBy(() -> SERIALIZER.fromBinary(bytes, "io.weir.Other"))
        .hasMessageContaining("unknown");
  }

  @Test
  void aCdcEventIsSmallerThanItsJacksonEncoding() {
    Written w = cdcEvent(200);
    byte[] binary = SERIALIZER.toBinary(w);
    byte[] cbor = serialization.serializerByIdentity().get(33).get().toBinary(w);
    LOG.info(
        "partition-event-size: entries=200 binary={} cbor={} ratio={}",
        binary.length,
        cbor.length,
        String.format(java.util.Locale.ROOT, "%.2f", (double) binary.length / cbor.length));
    assertThat(Serializers.manifestFor(serialization.findSerializerFor(w), w))
        .isEqualTo(Written.class.getName());
    assertThat(binary.length).isLessThan(cbor.length);
  }

  /** One event with every field set, including the rare ones (consumer, rule, loaded documents). */
  static Written everyField() {
    OutboxEntry e1 =
        new OutboxEntry(
            1_001,
            0,
            "orders",
            "o-1",
            "upsert",
            4,
            "{\"owner\":\"alice\"}",
            "{\"owner\":\"alice\",\"secret\":\"é✓\"}",
            1_700_000_000_000L,
            0);
    OutboxEntry e2 =
        new OutboxEntry(
            1_002, 1, "orders", "o-2", "delete", 2, "{\"secret\":1}", null, 1_700_000_000_001L, 0);
    FrameApplied api =
        new FrameApplied(
            "cmd-1",
            List.of(e1, e2),
            Optional.empty(),
            List.of("reset-a"),
            List.of(
                new Document("orders", "o-3", 1, "{\"secret\":2}", false, null),
                new Document("orders", "o-4", 3, null, true, "[\"alice\"]")),
            new Consumer(
                "proj",
                2,
                List.of("orders"),
                List.of("upsert", "delete"),
                10,
                20,
                false,
                -1,
                List.of(
                    new BatchReceipt(
                        11, 20, "digest", "batch-1", 1_003, List.of(5L, 6L), 1_700_000_000_002L))),
            List.of("orders"),
            new RuleChange("orders", "owner", 7));
    FrameApplied cdc =
        new FrameApplied(
            null,
            List.of(
                new OutboxEntry(
                    1_003, 0, "public.t", "7", "snapshot", 1, null, "{\"a\":1}", 5, 0x16B3748L)),
            Optional.of(new SourcePosition("slot-a", 0x16B3748L, 0x16B3000L, 2, false)),
            List.of(),
            List.of());
    return new Written("incarnation-1", List.of(api, cdc));
  }

  /** A CDC group commit: {@code n} row changes of one table in frames of two. */
  static Written cdcEvent(int n) {
    List<FrameApplied> frames = new ArrayList<>();
    long lsn = 0x3000000L;
    for (int i = 0; i < n; i += 2) {
      List<OutboxEntry> entries = new ArrayList<>();
      for (int k = i; k < Math.min(n, i + 2); k++) {
        String body =
            "{\"id\":"
                + k
                + ",\"a\":"
                + (k * 7)
                + ",\"b\":\""
                + "0123456789abcdef".repeat(4)
                + "\",\"c\":\"2026-12-01T12:00:00.123456Z\"}";
        entries.add(
            new OutboxEntry(
                50_000 + k,
                k - i,
                "public.bench",
                Integer.toString(k),
                k % 10 == 0 ? "delete" : "upsert",
                3,
                k % 10 == 0 ? body : null,
                k % 10 == 0 ? null : body,
                1_764_590_400_000L + k,
                lsn + i));
      }
      frames.add(
          new FrameApplied(
              null,
              entries,
              Optional.of(new SourcePosition("weir_bench", lsn + i, lsn + i - 2, 1, true)),
              List.of(),
              List.of()));
    }
    return new Written(null, frames);
  }

  private static Written randomWritten(Random r) {
    List<FrameApplied> frames = new ArrayList<>();
    int n = r.nextInt(4);
    for (int i = 0; i < n; i++) {
      List<OutboxEntry> entries = new ArrayList<>();
      int m = r.nextInt(5);
      for (int k = 0; k < m; k++) {
        entries.add(
            new OutboxEntry(
                r.nextLong(),
                r.nextInt(),
                text(r, 3),
                text(r, 6),
                text(r, 2),
                r.nextLong(),
                maybe(r, text(r, 40)),
                maybe(r, text(r, 40)),
                r.nextLong(),
                r.nextLong()));
      }
      Optional<SourcePosition> source =
          r.nextBoolean()
              ? Optional.empty()
              : Optional.of(
                  new SourcePosition(
                      text(r, 3),
                      r.nextLong(),
                      r.nextLong(),
                      1 + r.nextInt(1_000),
                      r.nextBoolean()));
      List<Document> loaded = new ArrayList<>();
      for (int k = r.nextInt(3); k > 0; k--) {
        loaded.add(
            new Document(
                text(r, 3),
                text(r, 5),
                r.nextLong(),
                maybe(r, text(r, 30)),
                r.nextBoolean(),
                maybe(r, text(r, 10))));
      }
      Consumer consumer =
          r.nextInt(4) != 0
              ? null
              : new Consumer(
                  text(r, 4),
                  r.nextLong(),
                  List.of(text(r, 3)),
                  List.of(),
                  r.nextLong(),
                  r.nextLong(),
                  r.nextBoolean(),
                  r.nextLong(),
                  r.nextBoolean()
                      ? List.of()
                      : List.of(
                          new BatchReceipt(
                              r.nextLong(),
                              r.nextLong(),
                              maybe(r, text(r, 8)),
                              maybe(r, text(r, 8)),
                              r.nextLong(),
                              List.of(r.nextLong(), r.nextLong()),
                              r.nextLong())));
      RuleChange rule =
          r.nextInt(4) != 0 ? null : new RuleChange(text(r, 3), maybe(r, text(r, 4)), r.nextLong());
      frames.add(
          new FrameApplied(
              maybe(r, text(r, 8)),
              entries,
              source,
              r.nextBoolean() ? List.of() : List.of(text(r, 3)),
              loaded,
              consumer,
              r.nextBoolean() ? List.of() : List.of(text(r, 3), text(r, 3)),
              rule,
              r.nextInt(4) != 0
                  ? null
                  : new Partition.Cut(r.nextInt(1_000), maybe(r, text(r, 6)))));
    }
    return new Written(maybe(r, text(r, 12)), frames);
  }

  private static String maybe(Random r, String s) {
    return r.nextInt(3) == 0 ? null : s;
  }

  /**
   * Text of up to {@code max} characters drawn from ASCII, Latin-1, other BMP and supplementary
   * code points.
   */
  private static String text(Random r, int max) {
    StringBuilder b = new StringBuilder();
    int n = r.nextInt(max + 1);
    for (int i = 0; i < n; i++) {
      switch (r.nextInt(4)) {
        case 0 -> b.append((char) (' ' + r.nextInt(95)));
        case 1 -> b.append((char) (0xA0 + r.nextInt(0x60)));
        case 2 -> b.append((char) (0x400 + r.nextInt(0x1000)));
        default -> b.appendCodePoint(0x1F300 + r.nextInt(200));
      }
    }
    // Sanity: the generator yields valid UTF-16 (no lone surrogates), which UTF-8 round-trips.
    assertThat(new String(b.toString().getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8))
        .isEqualTo(b.toString());
    return b.toString();
  }
}
