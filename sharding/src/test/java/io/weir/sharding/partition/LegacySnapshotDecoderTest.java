package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.serialization.SerializationFixtures;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The stream decoder of snapshots written before ADR 0032 ({@link LegacySnapshotDecoder}) against
 * the stored v1 fixture of {@link Partition.State}: it finds every document, the one Jackson
 * decodes, and the rest of the state; a resumed decode hands over only the documents after those
 * already moved, in batches.
 */
class LegacySnapshotDecoderTest {
  private static SerializationFixtures fixtures;

  @BeforeAll
  static void start() {
    fixtures = new SerializationFixtures("sharding");
  }

  @AfterAll
  static void stop() {
    fixtures.close();
  }

  private static List<SerializationFixtures.Serialized> stored() throws Exception {
    return fixtures.read("v1", Partition.State.class.getName());
  }

  @Test
  void theStoredOldStateDecodesAsAStreamToWhatJacksonDecodes() throws Exception {
    assertThat(stored()).isNotEmpty();
    for (SerializationFixtures.Serialized s : stored()) {
      Partition.State old = (Partition.State) fixtures.deserialize(s);
      List<Document> handed = new ArrayList<>();
      long sequence = old.events();
      PartitionState state =
          LegacySnapshotDecoder.decode(
              s.payload(), sequence, 0, 2, (batch, total) -> handed.addAll(batch));
      assertThat(handed)
          .as("every document, handed over once")
          .containsExactlyInAnyOrderElementsOf(old.documents().values());
      assertThat(state.index.size()).isEqualTo(old.documents().size());
      for (Document d : old.documents().values()) {
        DocumentIndex.Entry e = state.index.get(d.collection(), d.id());
        assertThat(e.revision()).isEqualTo(d.revision());
        assertThat(e.lastSeq()).as("every document as of the snapshot").isEqualTo(sequence);
        assertThat(e.deleted()).isEqualTo(d.deleted());
      }
      assertThat(state.events).isEqualTo(sequence);
      assertThat(state.nextSequence).isEqualTo(old.nextSequence());
      assertThat(state.outboxFirst).isEqualTo(old.outboxFirst());
      assertThat(state.outboxBytes).isEqualTo(old.outboxBytes());
      assertThat(state.incarnation).isEqualTo(old.incarnation());
      assertThat(state.eventBytes).isEqualTo(old.eventBytes());
      assertThat(state.mark).isEqualTo(old.mark());
      assertThat(state.receipts.keySet()).containsExactlyElementsOf(old.receipts().keySet());
      old.receipts()
          .forEach(
              (key, a) ->
                  assertThat(state.receipts.get(key).replay())
                      .isEqualTo(
                          new PartitionProtocol.Applied(
                              a.commandId(), a.firstSequence(), a.revisions(), true)));
      assertThat(state.watermarks).isEqualTo(old.watermarks());
      assertThat(state.partials).isEqualTo(old.partials());
      assertThat(state.outbox.toMap()).isEqualTo(old.outbox());
      assertThat(state.consumers).isEqualTo(old.consumers());
      assertThat(state.rules).isEqualTo(old.rules());
      assertThat(state.rowEpochs).isEqualTo(old.rowEpochs());
    }
  }

  @Test
  void aResumedDecodeHandsOverOnlyTheDocumentsAfterThoseMoved() throws Exception {
    // The journal fixture's snapshot: fifty documents of the old format.
    JsonNode journal =
        new ObjectMapper()
            .readTree(
                Path.of(System.getProperty("basedir", "."))
                    .resolve("src/test/resources/serialization/v1/journal/partition.json")
                    .toFile());
    JsonNode row = journal.get("snapshot").get(journal.get("snapshot").size() - 1);
    byte[] payload = Base64.getDecoder().decode(row.get("snapshot_payload").get("base64").asText());
    List<Document> all = new ArrayList<>();
    LegacySnapshotDecoder.decode(payload, 1, 0, 1_000, (batch, total) -> all.addAll(batch));
    assertThat(all).hasSizeGreaterThan(20);
    List<List<Document>> batches = new ArrayList<>();
    PartitionState resumed =
        LegacySnapshotDecoder.decode(
            payload, 1, 17, 5, (batch, total) -> batches.add(List.copyOf(batch)));
    assertThat(batches).allMatch(b -> b.size() <= 5);
    assertThat(batches.stream().flatMap(List::stream).toList())
        .isEqualTo(all.subList(17, all.size()));
    assertThat(resumed.index.size())
        .as("the index still holds every document")
        .isEqualTo(all.size());
  }
}
