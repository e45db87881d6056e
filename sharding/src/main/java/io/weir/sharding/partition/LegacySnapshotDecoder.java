package io.weir.sharding.partition;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.cbor.CBORFactory;
import com.fasterxml.jackson.dataformat.cbor.CBORParser;
import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.PartProgress;
import io.weir.sharding.partition.Partition.RowRule;
import io.weir.sharding.partition.Partition.Segment;
import io.weir.sharding.partition.Partition.SnapshotMark;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.io.IOException;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Decodes a snapshot of the format before ADR 0032 ({@link Partition.State} in Jackson CBOR, every
 * document's body inside) as a stream: the documents are handed over in batches as they are read,
 * never all held at once, and the rest becomes the index-only {@link PartitionState} of the same
 * journal sequence. The CBOR layout is that of the record's components, by name.
 */
final class LegacySnapshotDecoder {
  private LegacySnapshotDecoder() {}

  /** Takes a batch of decoded documents (of {@code total} in all; -1 when not known). */
  @FunctionalInterface
  interface Batches {
    void take(List<Document> batch, long total) throws SQLException;
  }

  private static final ObjectMapper CBOR =
      new ObjectMapper(new CBORFactory())
          .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

  /**
   * Decodes {@code payload}, the old snapshot at journal sequence {@code sequence}: documents after
   * the first {@code skip} go to {@code batches}, {@code batchSize} at a time (the batch list is
   * reused: the taker copies or writes it before returning).
   *
   * @return the state with every document in its index, each at {@code sequence}
   */
  static PartitionState decode(
      byte[] payload, long sequence, long skip, int batchSize, Batches batches)
      throws IOException, SQLException {
    PartitionState s = PartitionState.empty();
    s.events = sequence;
    try (JsonParser p = CBOR.getFactory().createParser(payload)) {
      expect(p.nextToken(), JsonToken.START_OBJECT);
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        JsonToken value = p.nextToken();
        switch (field) {
          case "documents" -> documents(p, value, s.index, sequence, skip, batchSize, batches);
          case "nextSequence" -> s.nextSequence = p.getLongValue();
          case "outboxFirst" -> s.outboxFirst = p.getLongValue();
          case "outboxBytes" -> s.outboxBytes = p.getLongValue();
          case "incarnation" -> s.incarnation = value == JsonToken.VALUE_NULL ? null : p.getText();
          case "eventBytes" -> s.eventBytes = p.getLongValue();
          case "receipts" -> {
            // Their time was not kept: they count as written now, and last the receipts' time.
            long now = System.currentTimeMillis();
            read(p, new TypeReference<LinkedHashMap<String, Applied>>() {})
                .forEach(
                    (key, a) ->
                        s.receipts.put(
                            key,
                            new Receipt(a.commandId(), a.firstSequence(), a.revisions(), now)));
            s.receiptsLatestAt = s.receipts.isEmpty() ? 0 : now;
          }
          case "watermarks" ->
              s.watermarks.putAll(read(p, new TypeReference<HashMap<String, Long>>() {}));
          case "partials" ->
              s.partials.putAll(read(p, new TypeReference<HashMap<String, PartProgress>>() {}));
          case "outbox" ->
              read(p, new TypeReference<TreeMap<Long, Segment>>() {}).forEach(s.outbox::append);
          case "mark" -> {
            SnapshotMark m =
                value == JsonToken.VALUE_NULL ? null : CBOR.readValue(p, SnapshotMark.class);
            if (m != null) {
              s.mark.events = m.events;
              s.mark.eventBytes = m.eventBytes;
            }
          }
          case "consumers" ->
              s.consumers.putAll(read(p, new TypeReference<HashMap<String, Consumer>>() {}));
          case "rules" -> s.rules.putAll(read(p, new TypeReference<HashMap<String, RowRule>>() {}));
          case "rowEpochs" ->
              s.rowEpochs.putAll(read(p, new TypeReference<HashMap<String, Long>>() {}));
          // events is the snapshot's sequence; documentBytes: the index counts its own.
          default -> p.skipChildren();
        }
      }
      if (p.nextToken() != null) {
        throw new IOException("the old snapshot has trailing content");
      }
    }
    return s;
  }

  private static void documents(
      JsonParser p,
      JsonToken value,
      DocumentIndex index,
      long sequence,
      long skip,
      int batchSize,
      Batches batches)
      throws IOException, SQLException {
    if (value == JsonToken.VALUE_NULL) {
      return;
    }
    expect(value, JsonToken.START_OBJECT);
    long total = -1;
    if (p instanceof CBORParser cbor && cbor.getParsingContext().hasExpectedLength()) {
      total = cbor.getParsingContext().getExpectedLength();
    }
    List<Document> batch = new ArrayList<>();
    long seen = 0;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      p.nextToken();
      Document d = document(p);
      index.put(
          d.collection(),
          d.id(),
          DocumentIndex.Entry.of(d.revision(), sequence, d.deleted() ? null : d.body()));
      if (++seen > skip) {
        batch.add(d);
        if (batch.size() == batchSize) {
          batches.take(batch, total);
          batch.clear();
        }
      }
    }
    if (!batch.isEmpty()) {
      batches.take(batch, total);
      batch.clear();
    }
  }

  /** A map read whole (small: everything but the documents); empty for null. */
  private static <T extends Map<?, ?>> T read(JsonParser p, TypeReference<T> type)
      throws IOException {
    T value = p.currentToken() == JsonToken.VALUE_NULL ? null : CBOR.readValue(p, type);
    return value != null ? value : CBOR.convertValue(Map.of(), type);
  }

  private static void expect(JsonToken actual, JsonToken expected) throws IOException {
    if (actual != expected) {
      throw new IOException("the old snapshot is not of the expected shape");
    }
  }

  /** A document of the old snapshot (the parser at its START_OBJECT). */
  private static Document document(JsonParser p) throws IOException {
    expect(p.currentToken(), JsonToken.START_OBJECT);
    String collection = null;
    String id = null;
    long revision = 0;
    String body = null;
    boolean deleted = false;
    String acl = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String field = p.currentName();
      JsonToken value = p.nextToken();
      boolean isNull = value == JsonToken.VALUE_NULL;
      switch (field) {
        case "collection" -> collection = isNull ? null : p.getText();
        case "id" -> id = isNull ? null : p.getText();
        case "revision" -> revision = p.getLongValue();
        case "body" -> body = isNull ? null : p.getText();
        case "deleted" -> deleted = p.getBooleanValue();
        case "acl" -> acl = isNull ? null : p.getText();
        default -> p.skipChildren();
      }
    }
    if (collection == null || id == null) {
      throw new IOException("a document of the old snapshot has no collection or id");
    }
    return new Document(collection, id, revision, body, deleted, acl);
  }
}
