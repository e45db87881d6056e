package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.partition.Partitioning;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Crash injection into projection commits: a writer keeps adding documents to one partition while a
 * consumer reads batches and commits each with one effect (an aggregate document holding its count
 * of source entries, its batch number and checkpoint); a killer SIGKILLs the node and starts a new
 * one: every other kill lands while a commit is in flight (0-40 ms after it was sent), the others
 * right after a commit went through but before its sender used the reply (the reply is lost with
 * the node). The consumer retries an unanswered commit with the same token and effects until it
 * gets an answer: a commit that went through answers {@code alreadyProcessed} with its original
 * receipt.
 *
 * <p>Afterwards: the aggregate counts every written document exactly once (loss, dup); its
 * checkpoint equals the consumer's (effects and checkpoint together: torn); an audit consumer reads
 * the whole outbox and finds one aggregate entry per committed batch with batch numbers 1..n in
 * order, and one entry per written document. Prints the counts.
 *
 * <p>Size: {@code -Dweir.crash.projection-kills} (default 3) and {@code
 * -Dweir.crash.projection-writes} (at least this many documents, default 1500).
 */
class ProjectionCrashIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int PARTITIONS = 8;
  private static final int PARTITION = 3;

  /** How long a retry loop may go without an answer: a restart, on a slow machine. */
  private static final Duration STALL = START_UP.plusSeconds(60);

  private final AtomicReference<NodeProcess> current = new AtomicReference<>();

  @Test
  void commitsUnderSigkillAreAllOrNothingAndRetriesGetTheirReceipt() throws Exception {
    int kills = Integer.getInteger("weir.crash.projection-kills", 3);
    int minWrites = Integer.getInteger("weir.crash.projection-writes", 1500);
    long seed = Long.getLong("weir.crash.seed", System.nanoTime());
    Random random = new Random(seed);
    db = TestPostgres.server().freshDatabase("projcrash");
    Path config = Files.createTempFile("weir-projcrash", ".conf");
    Files.writeString(config, "weir.partitions.count = " + PARTITIONS + "\n");
    List<String> ids = idsIn("src", 200_000);
    String aggregate = idsIn("agg", 1).get(0);

    current.set(startNode("projcrash", config));
    awaitReady(current.get());
    JsonNode configured =
        call(
            "POST",
            "/admin/projections/configure",
            "{\"partition\":"
                + PARTITION
                + ",\"consumer\":\"agg\",\"generation\":1,\"collections\":[\"src\"]}");
    assertThat(configured.get("consumer").get("checkpoint").asLong()).isZero();

    // The writer: documents src/<id> once each, retried with an idempotency key until acknowledged.
    AtomicBoolean stopWriting = new AtomicBoolean();
    AtomicInteger written = new AtomicInteger();
    AtomicReference<Throwable> writerError = new AtomicReference<>();
    Thread writer =
        new Thread(
            () -> {
              try {
                for (int i = 0;
                    i < ids.size() && (!stopWriting.get() || written.get() < minWrites);
                    i++) {
                  String path = "/v1/documents/src/" + ids.get(i);
                  Map<String, String> key = Map.of("Idempotency-Key", "w-" + i);
                  long since = System.nanoTime();
                  while (true) {
                    progressWithin(since, STALL, "write " + i);
                    Optional<HttpResponse<String>> r =
                        current.get().send("PUT", path, "{\"i\":" + i + "}", key);
                    if (r.isPresent() && r.get().statusCode() == 200) {
                      break;
                    }
                    if (r.isPresent()
                        && r.get().statusCode() != 503
                        && r.get().statusCode() != 429) {
                      throw new AssertionError(
                          "a write failed with " + r.get().statusCode() + ": " + r.get().body());
                    }
                    Thread.sleep(100);
                  }
                  written.incrementAndGet();
                }
              } catch (Throwable t) {
                writerError.set(t);
              }
            },
            "projcrash-writer");
    writer.setDaemon(true);

    // The killer: waits until a commit is in flight, then SIGKILLs the node a random moment later.
    AtomicBoolean commitInFlight = new AtomicBoolean();
    AtomicBoolean dropReply = new AtomicBoolean();
    AtomicBoolean replyDropped = new AtomicBoolean();
    AtomicBoolean killing = new AtomicBoolean(true);
    List<Long> delays = new ArrayList<>();
    AtomicReference<Throwable> killerError = new AtomicReference<>();
    Thread killer =
        new Thread(
            () -> {
              try {
                for (int k = 0; k < kills; k++) {
                  Thread.sleep(500 + random.nextInt(2000));
                  // Every other kill lands after the commit went through but before its sender saw
                  // the
                  // reply (the sender gives up on it): the retry must get the original receipt.
                  boolean afterCommit = k % 2 == 1;
                  dropReply.set(afterCommit);
                  await("a commit in flight")
                      .atMost(Duration.ofMinutes(4))
                      .pollInterval(Duration.ofMillis(1))
                      .until(afterCommit ? replyDropped::get : commitInFlight::get);
                  long delay = afterCommit ? 0 : random.nextInt(40);
                  delays.add(delay);
                  Thread.sleep(delay);
                  current.get().kill();
                  NodeProcess next = startNode("projcrash", config);
                  awaitReady(next);
                  current.set(next);
                }
              } catch (Throwable t) {
                killerError.set(t);
              } finally {
                killing.set(false);
              }
            },
            "projcrash-killer");
    killer.setDaemon(true);

    writer.start();
    killer.start();
    long count = 0;
    long batches = 0;
    long revision = 0;
    long checkpoint = 0;
    int retried = 0;
    int alreadyProcessed = 0;
    long lastEffectCheckpoint = 0;
    long answeredAt = System.nanoTime();
    while (true) {
      Optional<JsonNode> read =
          answer(
              "/admin/projections/read",
              "{\"partition\":"
                  + PARTITION
                  + ",\"consumer\":\"agg\",\"generation\":1,\"maxEntries\":50}");
      if (read.isEmpty()) {
        progressWithin(answeredAt, STALL, "the projection read answers");
        Thread.sleep(100);
        continue;
      }
      answeredAt = System.nanoTime();
      JsonNode batch = read.get();
      assertThat(batch.get("start").asLong())
          .as("reads start at the committed checkpoint")
          .isEqualTo(checkpoint);
      long through = batch.get("through").asLong();
      if (through == checkpoint) {
        if (!killing.get() && !writer.isAlive() && through == batch.get("tail").asLong()) {
          break;
        }
        stopWriting.set(!killing.get());
        Thread.sleep(20);
        continue;
      }
      boolean effects = batch.get("entries").size() > 0;
      String request =
          CountingProjection.commitRequest(batch, aggregate, count, batches, checkpoint, revision);
      JsonNode done;
      int attempts = 0;
      if (dropReply.get()) {
        // The commit goes through, its reply is thrown away, and the node dies before anything
        // else.
        NodeProcess before = current.get();
        // Until it went through (the node may still be recovering: 503), then drop the reply.
        long since = System.nanoTime();
        while (before
            .post("/admin/projections/commit", request)
            .map(r -> r.statusCode() != 200)
            .orElse(true)) {
          progressWithin(since, STALL, "the commit whose reply is dropped goes through");
          Thread.sleep(100);
        }
        replyDropped.set(true);
        await("the node is replaced").atMost(STALL).until(() -> current.get() != before);
        replyDropped.set(false);
        dropReply.set(false);
        attempts++;
      }
      long committing = System.nanoTime();
      while (true) {
        attempts++;
        commitInFlight.set(true);
        Optional<JsonNode> r = answer("/admin/projections/commit", request);
        commitInFlight.set(false);
        if (r.isPresent()) {
          done = r.get();
          break;
        }
        progressWithin(committing, STALL, "the commit answers");
        Thread.sleep(100);
      }
      answeredAt = System.nanoTime();
      assertThat(done.get("checkpoint").asLong()).isEqualTo(through);
      if (effects) {
        revision = done.get("receipt").get("revisions").get(0).asLong();
        count += batch.get("entries").size();
        batches++;
        lastEffectCheckpoint = through;
      }
      checkpoint = through;
      if (attempts > 1) {
        retried++;
        if (done.get("alreadyProcessed").asBoolean()) {
          alreadyProcessed++;
        }
        // A commit the node may have died in: its effect, checkpoint and receipt are all there.
        JsonNode now = JSON.readTree(get("/v1/documents/agg/" + aggregate).body());
        if (batches > 0) {
          assertThat(now.get("batch").asLong())
              .as("the aggregate after a retried commit")
              .isEqualTo(batches);
          assertThat(now.get("checkpoint").asLong()).isEqualTo(lastEffectCheckpoint);
        }
        assertThat(consumerCheckpoint())
            .as("the checkpoint after a retried commit")
            .isEqualTo(checkpoint);
      }
      stopWriting.set(!killing.get());
    }
    writer.join(STALL.toMillis());
    killer.join(STALL.toMillis());
    assertThat(writer.isAlive()).as("the writer ends").isFalse();
    assertThat(killer.isAlive()).as("the killer ends").isFalse();
    assertThat(writerError.get()).as("the writer").isNull();
    assertThat(killerError.get()).as("the killer").isNull();

    // The aggregate and the consumer's checkpoint.
    JsonNode agg = JSON.readTree(get("/v1/documents/agg/" + aggregate).body());
    long loss = Math.max(0, written.get() - agg.get("count").asLong());
    long dup = Math.max(0, agg.get("count").asLong() - written.get());
    long torn =
        agg.get("checkpoint").asLong() == lastEffectCheckpoint && consumerCheckpoint() == checkpoint
            ? 0
            : 1;

    // The audit: the whole outbox, once.
    call(
        "POST",
        "/admin/projections/configure",
        "{\"partition\":" + PARTITION + ",\"consumer\":\"audit\",\"generation\":1}");
    long srcEntries = 0;
    long aggEntries = 0;
    long orderErrors = 0;
    while (true) {
      JsonNode b =
          call(
              "POST",
              "/admin/projections/read",
              "{\"partition\":"
                  + PARTITION
                  + ",\"consumer\":\"audit\",\"generation\":1,\"maxEntries\":1000}");
      for (JsonNode e : b.get("entries")) {
        if (e.get("collection").asText().equals("src")) {
          srcEntries++;
        } else {
          aggEntries++;
          if (e.get("after").get("batch").asLong() != aggEntries
              || e.get("revision").asLong() != aggEntries) {
            orderErrors++;
          }
        }
      }
      call("POST", "/admin/projections/commit", "{\"token\":\"" + b.get("token").asText() + "\"}");
      if (!b.get("hasMore").asBoolean()) {
        break;
      }
    }
    System.out.printf(
        "projection-crash: kills=%d writes=%d batches=%d retried-commits=%d already-processed=%d"
            + " src-entries=%d agg-entries=%d loss=%d dup=%d torn=%d order-errors=%d seed=%d delays-ms=%s%n",
        kills,
        written.get(),
        batches,
        retried,
        alreadyProcessed,
        srcEntries,
        aggEntries,
        loss,
        dup,
        torn,
        orderErrors,
        seed,
        delays);
    assertThat(loss).as("every written document is counted (loss)").isZero();
    // Every other kill follows a commit that went through; a kill into a commit in flight may too.
    assertThat(alreadyProcessed)
        .as("kills after a commit went through: retries answered from the receipt")
        .isBetween(kills / 2, retried);
    assertThat(dup).as("no written document is counted twice (dup)").isZero();
    assertThat(torn).as("the effects and the checkpoint moved together").isZero();
    assertThat(srcEntries).as("one outbox entry per written document").isEqualTo(written.get());
    assertThat(aggEntries).as("one effect entry per committed batch").isEqualTo(batches);
    assertThat(orderErrors).as("batch effects in order, revisions 1..n").isZero();
    assertThat(agg.get("batch").asLong()).isEqualTo(batches);
  }

  private long consumerCheckpoint() throws Exception {
    JsonNode status = call("GET", "/admin/outbox/status?partition=" + PARTITION, null);
    for (JsonNode c : status.get("consumers")) {
      if (c.get("consumer").asText().equals("agg")) {
        return c.get("checkpoint").asLong();
      }
    }
    throw new AssertionError("no consumer agg in the status");
  }

  /** A GET that is retried while the node (whichever is current) is down or recovering. */
  private HttpResponse<String> get(String path) throws Exception {
    return NodeProcess.sendIdempotent(current::get, "GET", path, null, Map.of(), STALL);
  }

  private static List<String> idsIn(String collection, int n) {
    List<String> out = new ArrayList<>();
    for (int i = 0; out.size() < n; i++) {
      String id = collection + "-" + i;
      if (Partitioning.partitionOf(collection, id, PARTITIONS) == PARTITION) {
        out.add(id);
      }
    }
    return out;
  }

  private static void awaitReady(NodeProcess node) {
    awaitReady(node, PARTITIONS);
  }

  private Optional<JsonNode> answer(String path, String body) throws Exception {
    return answer(current.get(), path, body);
  }

  private JsonNode call(String method, String path, String body) throws Exception {
    return call(current::get, method, path, body);
  }
}
