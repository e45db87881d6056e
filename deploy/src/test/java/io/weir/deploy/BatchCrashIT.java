package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Batch writes ({@code POST /v1/documents/batch}, ADR 0046) under SIGKILL: a writer sends batches
 * of new documents spread over every partition, each with an Idempotency-Key of its own, and
 * retries a batch with the same key until every item of it is applied, through node restarts; a
 * killer SIGKILLs the node at random moments and starts a new one. A batch cut by a kill may have
 * been written in some partitions and not in others: its retry must finish it without writing any
 * group twice.
 *
 * <p>Then some batches are sent again with their keys after the last restart (a lost reply): the
 * recovered receipts answer every item, replayed, writing nothing. Afterwards the changes feed
 * holds every acknowledged document exactly once, at revision 1 (loss, dup), and nothing else.
 * Prints the counts. Size: {@code -Dweir.crash.batch-kills} (default 3), {@code
 * -Dweir.crash.batch-batches} (default 120, of 40 documents).
 */
class BatchCrashIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int PARTITIONS = 8;
  private static final int ITEMS = 40;
  private static final java.time.Duration STALL = START_UP.plusSeconds(60);

  private static final int WRITERS = 4;
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(BatchCrashIT.class);

  private final AtomicReference<NodeProcess> current = new AtomicReference<>();

  /** Batch {@code b}: {@value #ITEMS} new documents {@code b<b>-<i>}. */
  private static String batch(int b) {
    StringBuilder body = new StringBuilder("{\"items\":[");
    for (int i = 0; i < ITEMS; i++) {
      body.append(i == 0 ? "" : ",")
          .append("{\"op\":\"put\",\"collection\":\"batched\",\"id\":\"b")
          .append(b)
          .append('-')
          .append(i)
          .append("\",\"body\":{\"b\":")
          .append(b)
          .append(",\"i\":")
          .append(i)
          .append("}}");
    }
    return body.append("]}").toString();
  }

  @Test
  void keyedBatchesRetriedThroughKillsWriteEveryDocumentOnce() throws Exception {
    int kills = Integer.getInteger("weir.crash.batch-kills", 3);
    int batches = Integer.getInteger("weir.crash.batch-batches", 120);
    long seed = Long.getLong("weir.crash.seed", System.nanoTime());
    Random random = new Random(seed);
    db = TestPostgres.server().freshDatabase("batchcrash");
    Path config = Files.createTempFile("weir-batchcrash", ".conf");
    Files.writeString(config, "weir.partitions.count = " + PARTITIONS + "\n");
    config.toFile().deleteOnExit();
    current.set(startNode("batchcrash", config));
    awaitReady(current.get(), PARTITIONS);

    Map<String, Long> acked = new ConcurrentHashMap<>(); // id -> revision answered
    AtomicInteger retried = new AtomicInteger();
    AtomicInteger replayedItems = new AtomicInteger();
    AtomicReference<Throwable> writerError = new AtomicReference<>();
    // Several writers, so that a kill nearly always cuts batches in flight, some of whose groups
    // are written and others not.
    List<Thread> writers = new ArrayList<>();
    for (int w = 0; w < WRITERS; w++) {
      int first = w;
      Thread writer =
          new Thread(
              () -> {
                try {
                  for (int b0 = first; b0 < batches; b0 += WRITERS) {
                    int b = b0;
                    String body = batch(b);
                    AtomicInteger attempts = new AtomicInteger();
                    // Retried with its key until every item is applied, through restarts.
                    org.awaitility.Awaitility.await("batch " + b)
                        .atMost(STALL)
                        .pollInterval(java.time.Duration.ofMillis(100))
                        .until(
                            () -> {
                              int attempt = attempts.getAndIncrement();
                              Optional<HttpResponse<String>> r =
                                  current
                                      .get()
                                      .send(
                                          "POST",
                                          "/v1/documents/batch",
                                          body,
                                          Map.of(
                                              "Idempotency-Key",
                                              "batch-" + b,
                                              "Content-Type",
                                              "application/json"));
                              if (r.isEmpty() || r.get().statusCode() == 503) {
                                return false;
                              }
                              if (r.get().statusCode() != 200) {
                                throw new AssertionError(
                                    "a batch failed with "
                                        + r.get().statusCode()
                                        + ": "
                                        + r.get().body());
                              }
                              JsonNode reply = JSON.readTree(r.get().body());
                              if (reply.get("applied").asInt() != ITEMS) {
                                for (JsonNode item : reply.get("results")) {
                                  if (!item.get("status").asText().equals("applied")
                                      && !item.path("retryable").asBoolean(false)) {
                                    throw new AssertionError(
                                        "batch " + b + " has an item refused for good: " + item);
                                  }
                                }
                                return false;
                              }
                              for (JsonNode item : reply.get("results")) {
                                acked.put(item.get("id").asText(), item.get("revision").asLong());
                                if (item.get("replayed").asBoolean()) {
                                  replayedItems.incrementAndGet();
                                }
                              }
                              if (attempt > 0) {
                                retried.incrementAndGet();
                              }
                              return true;
                            });
                  }
                } catch (Throwable t) {
                  writerError.set(t);
                }
              },
              "batchcrash-writer-" + w);
      writer.setDaemon(true);
      writers.add(writer);
    }
    AtomicBoolean killing = new AtomicBoolean(true);
    List<Long> delays = new ArrayList<>();
    AtomicReference<Throwable> killerError = new AtomicReference<>();
    Thread killer =
        new Thread(
            () -> {
              try {
                for (int k = 0; k < kills; k++) {
                  long delay = 500 + random.nextInt(2500);
                  delays.add(delay);
                  Thread.sleep(delay);
                  current.get().kill();
                  NodeProcess next = startNode("batchcrash", config);
                  awaitReady(next, PARTITIONS);
                  current.set(next);
                }
              } catch (Throwable t) {
                killerError.set(t);
              } finally {
                killing.set(false);
              }
            },
            "batchcrash-killer");
    killer.setDaemon(true);
    writers.forEach(Thread::start);
    killer.start();
    for (Thread writer : writers) {
      writer.join(STALL.multipliedBy(4).toMillis());
      assertThat(writer.isAlive()).as("the writers finished").isFalse();
    }
    killer.join(STALL.toMillis());
    assertThat(writerError.get()).as("writer").isNull();
    assertThat(killerError.get()).as("killer").isNull();

    // A reply lost after the last kill: batches sent again with their keys are answered by the
    // receipts the restarted node recovered, and write nothing.
    for (int b = 0; b < batches; b += Math.max(1, batches / 5)) {
      JsonNode again =
          JSON.readTree(
              NodeProcess.sendIdempotent(
                      current::get,
                      "POST",
                      "/v1/documents/batch",
                      batch(b),
                      Map.of("Idempotency-Key", "batch-" + b, "Content-Type", "application/json"),
                      NodeProcess.ANSWER_DEADLINE)
                  .body());
      assertThat(again.get("applied").asInt()).as("batch %d sent again", b).isEqualTo(ITEMS);
      for (JsonNode item : again.get("results")) {
        assertThat(item.get("replayed").asBoolean())
            .as("batch %d answered by receipts", b)
            .isTrue();
        assertThat(item.get("revision").asLong()).isEqualTo(1);
      }
    }

    // Every change of the collection, from the beginning.
    Map<String, Integer> seen = new HashMap<>();
    int wrongRevision = 0;
    String cursor = null;
    while (true) {
      JsonNode page =
          call(current::get, "POST", "/v1/changes/read", changesRequest("batched", cursor, 500));
      for (JsonNode c : page.get("changes")) {
        String id = c.get("id").asText();
        seen.merge(id, 1, Integer::sum);
        if (c.get("revision").asLong() != 1) {
          wrongRevision++;
        }
      }
      cursor = page.get("cursor").asText();
      if (!page.get("hasMore").asBoolean()) {
        break;
      }
    }
    long loss = acked.keySet().stream().filter(id -> !seen.containsKey(id)).count();
    long dup = seen.values().stream().filter(n -> n > 1).count();
    long unacked = seen.keySet().stream().filter(id -> !acked.containsKey(id)).count();
    long answeredOtherRevision = acked.values().stream().filter(r -> r != 1).count();
    LOG.info(
        String.format(
                "batch crash: seed=%d kills=%d delays=%s batches=%d documents=%d retried-batches=%d"
                    + " replayed-items=%d loss=%d dup=%d unacknowledged-seen=%d revision-not-1=%d%n",
                seed,
                kills,
                delays,
                batches,
                acked.size(),
                retried.get(),
                replayedItems.get(),
                loss,
                dup,
                unacked,
                wrongRevision + answeredOtherRevision)
            .trim());
    assertThat(acked).as("every document acknowledged").hasSize(batches * ITEMS);
    assertThat(loss).as("acknowledged documents missing from the feed").isZero();
    assertThat(dup).as("documents written twice").isZero();
    assertThat(unacked).as("documents no batch acknowledged").isZero();
    assertThat(wrongRevision + answeredOtherRevision)
        .as("changes or answers with a revision other than 1")
        .isZero();
  }
}
