package io.weir.deploy;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The projection consumer the crash tests run: it counts the entries of its batches into one
 * aggregate document, written as the batch's effect under a compare-and-set on its revision.
 */
final class CountingProjection {
  private static final ObjectMapper JSON = new ObjectMapper();

  private CountingProjection() {}

  /**
   * The commit request of {@code batch}: the aggregate document {@code {count, batch, checkpoint}}
   * as an upsert expecting {@code revision} when the batch has entries; no effect otherwise (a
   * batch of only the consumer's own, filtered, effects advances without one, or every effect would
   * make the next batch). The command id names the batch, so a retried commit is the same command.
   *
   * @param count entries counted before this batch
   * @param batches batches committed before this one
   * @param checkpoint the checkpoint the batch starts at
   */
  static String commitRequest(
      JsonNode batch, String aggregate, long count, long batches, long checkpoint, long revision)
      throws JsonProcessingException {
    long through = batch.get("through").asLong();
    ObjectNode document = JSON.createObjectNode();
    document.put("count", count + batch.get("entries").size());
    document.put("batch", batches + 1);
    document.put("checkpoint", through);
    ObjectNode body = JSON.createObjectNode();
    body.put("token", batch.get("token").asText());
    body.put("commandId", "b-" + checkpoint + "-" + through);
    if (batch.get("entries").size() > 0) {
      ObjectNode effect = body.putArray("effects").addObject();
      effect.put("op", "upsert");
      effect.put("collection", "agg");
      effect.put("id", aggregate);
      effect.put("expectedRevision", revision);
      effect.set("document", document);
    }
    return JSON.writeValueAsString(body);
  }
}
