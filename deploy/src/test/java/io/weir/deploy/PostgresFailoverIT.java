package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.StorageSystem;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * RF3 storage under a primary crash: {@code deploy/bin/pg-rf3.sh} runs a primary and two standbys
 * with quorum commit in a home of the test's own; one node process connects with the multi-host URL
 * ({@code targetServerType=primary}). A writer keeps putting documents through the document API
 * (each request with its own Idempotency-Key, retried with it until acknowledged) and records the
 * revision of every acknowledged write. The primary is SIGKILLed ({@code kill-primary}) and a
 * standby promoted ({@code promote}); the writer goes on until the node writes again, without a
 * node restart. Afterwards every acknowledged write must be readable with at least its revision.
 * Then the fenced old primary rejoins as a standby ({@code rejoin}) and every member holds the
 * journal.
 *
 * <p>Needs no WEIR_TEST_PG_URL: the cluster is the test's own.
 */
class PostgresFailoverIT extends EndToEndTest {
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(PostgresFailoverIT.class);

  private static final int PARTITIONS = 8;
  private static final int IDS = 300;
  private static final int WRITES_AFTER_PROMOTION = 100;

  @Test
  void noAcknowledgedWriteIsLostWhenThePrimaryDiesAndAStandbyIsPromoted() throws Exception {
    Path tmp = Files.createTempDirectory("weir-pg-rf3");
    Map<String, String> home = rf3Home(tmp);
    try {
      Map<String, String> pg = rf3(home, "start");
      assertThat(pg.get("WEIR_PG_URL")).contains(",").endsWith("targetServerType=primary");
      // RF3: three copies, a commit acknowledged by a majority (the primary + 1).
      NodeProcess node = startNode("pg-failover", pg, tmp, 2);
      assertThat(node.jsonUntil("/health/ready", NodeProcess.ANSWER_DEADLINE).toString())
          .as("quorum commit over two streaming standbys: 2 copies before an acknowledgement")
          .contains("\"storage-copies\":\"2 of 2 required\"");
      assertThat(node.getUntil("/metrics", true).body()).contains("weir_storage_copies 2.0");

      // The writer: write i goes to document d-(i mod IDS) (so revisions climb), key k-i.
      Map<String, Long> acknowledged = new ConcurrentHashMap<>();
      java.util.Queue<Map.Entry<String, Long>> everyAck =
          new java.util.concurrent.ConcurrentLinkedQueue<>();
      AtomicInteger acks = new AtomicInteger();
      java.util.Queue<long[]> ackedWrites = new java.util.concurrent.ConcurrentLinkedQueue<>();
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong promotedAt = new AtomicLong(Long.MAX_VALUE);
      AtomicLong firstAckAfterPromotion = new AtomicLong(-1);
      AtomicInteger writesAfterPromotion = new AtomicInteger();
      AtomicReference<Throwable> writerError = new AtomicReference<>();
      Thread writer =
          new Thread(
              () -> {
                try {
                  for (int i = 0; !stop.get(); i++) {
                    String id = "d-" + (i % IDS);
                    Map<String, String> headers =
                        Map.of("Idempotency-Key", "k-" + i, "Content-Type", "application/json");
                    while (!stop.get()) {
                      Optional<HttpResponse<String>> r =
                          node.send("PUT", "/v1/documents/c/" + id, "{\"i\":" + i + "}", headers);
                      if (r.isPresent() && r.get().statusCode() == 200) {
                        long revision =
                            Long.parseLong(
                                r.get()
                                    .headers()
                                    .firstValue("ETag")
                                    .orElseThrow()
                                    .replace("\"", ""));
                        acknowledged.merge(id, revision, Math::max);
                        everyAck.add(Map.entry(id, revision));
                        ackedWrites.add(new long[] {i, revision});
                        acks.incrementAndGet();
                        long now = System.nanoTime();
                        if (now > promotedAt.get()) {
                          firstAckAfterPromotion.compareAndSet(-1, now);
                          writesAfterPromotion.incrementAndGet();
                        }
                        break;
                      }
                      // 503 (database unavailable) or no answer: retry with the same key; 4xx is a
                      // bug.
                      if (r.isPresent()
                          && r.get().statusCode() < 500
                          && r.get().statusCode() != 429) {
                        throw new AssertionError(
                            "a write failed with " + r.get().statusCode() + ": " + r.get().body());
                      }
                      Thread.sleep(50);
                    }
                  }
                } catch (Throwable t) {
                  writerError.set(t);
                }
              },
              "pg-failover-writer");
      writer.setDaemon(true);
      writer.start();
      // A projection consumer on every partition commits batches beside the writer; the
      // checkpoint of every acknowledged commit is recorded.
      AtomicBoolean stopProjector = new AtomicBoolean();
      Projector projector = new Projector(node, stopProjector);
      projector.start();

      awaitAcks(acks, 300, writerError);
      long killedAt = System.nanoTime();
      rf3(home, "kill-primary");
      rf3(home, "promote");
      long promoted = System.nanoTime();
      promotedAt.set(promoted);
      // Writes resume within seconds on a quiet machine; the bound allows a machine 4x slower.
      long deadline = promoted + TimeUnit.SECONDS.toNanos(180);
      while (writesAfterPromotion.get() < WRITES_AFTER_PROMOTION
          && System.nanoTime() < deadline
          && writerError.get() == null) {
        Thread.sleep(100);
      }
      stop.set(true);
      writer.join(90_000);
      // The consumer catches up with the writes after the promotion.
      await("consumer commits acknowledged after the promotion")
          .atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(100))
          .until(() -> projector.commitsAfter(promoted) >= PARTITIONS || !projector.isAlive());
      stopProjector.set(true);
      projector.join(90_000);
      assertThat(writerError.get()).as("the writer failed").isNull();
      assertThat(projector.error.get()).as("the projection consumer failed").isNull();
      assertThat(writesAfterPromotion.get())
          .as(
              "the node should write again after promotion without a restart (log: %s)",
              NodeProcess.logs().resolve("pg-failover.log"))
          .isGreaterThanOrEqualTo(WRITES_AFTER_PROMOTION);

      // Read each document once; every acknowledged write is then checked against it.
      Map<String, Long> stored = new HashMap<>();
      for (String id : acknowledged.keySet()) {
        HttpResponse<String> r = call(node, "/v1/documents/c/" + id);
        stored.put(
            id,
            r.statusCode() == 200
                ? Long.parseLong(r.headers().firstValue("ETag").orElseThrow().replace("\"", ""))
                : -1L);
      }
      int checked = 0;
      int missing = 0;
      for (Map.Entry<String, Long> ack : everyAck) {
        checked++;
        if (stored.get(ack.getKey()) < ack.getValue()) {
          missing++;
        }
      }
      long firstWriteMs = TimeUnit.NANOSECONDS.toMillis(firstAckAfterPromotion.get() - promoted);
      LOG.info(
          String.format(
              "postgres-failover: acknowledged=%d checked=%d missing=%d writes-after-promotion=%d"
                  + " time-to-first-write-after-promotion-ms=%d kill-to-first-write-ms=%d",
              acks.get(),
              checked,
              missing,
              writesAfterPromotion.get(),
              firstWriteMs,
              TimeUnit.NANOSECONDS.toMillis(firstAckAfterPromotion.get() - killedAt)));
      assertThat(checked).as("every acknowledged write is checked").isEqualTo(acks.get());
      assertThat(missing).as("acknowledged writes missing after failover").isZero();

      // Every partition recovered from the promoted storage and checked its acknowledged mark.
      List<com.fasterxml.jackson.databind.JsonNode> partitions =
          await("every partition serves again")
              .atMost(Duration.ofSeconds(120))
              .pollInterval(Duration.ofMillis(250))
              .until(
                  () -> partitions(node),
                  list -> list.size() == PARTITIONS && states(list).allMatch("serving"::equals));
      long entries = partitions.stream().mapToLong(p -> p.path("outboxEntries").asLong()).sum();
      // The node saw the storage change (its identity, or it was unavailable and is reachable
      // again: which one depends on when its probe ran) and its partitions recovered again.
      assertThat(NodeProcess.logs().resolve("pg-failover.log"))
          .content()
          .containsAnyOf("identity changed", "PostgreSQL is unavailable")
          .contains("recovering again before it serves");
      // One outbox entry per acknowledged write (a write the writer stopped retrying may add one).
      assertThat(entries).as("outbox entries").isBetween((long) acks.get(), acks.get() + 1L);
      // The partitions checked their journals on the promoted standby's new timeline, and the
      // writes after the promotion were acknowledged on it.
      String system =
          partitions.get(0).path("storage").path("checkedOn").path("systemIdentifier").asText();
      assertThat(system).matches("[0-9]+");
      for (com.fasterxml.jackson.databind.JsonNode p : partitions) {
        com.fasterxml.jackson.databind.JsonNode storage = p.path("storage");
        assertThat(storage.path("checkedOn").path("timeline").asInt())
            .as("partition %s checked its journal on the promoted timeline", p.path("partition"))
            .isEqualTo(2);
        assertThat(storage.path("checkedOn").path("systemIdentifier").asText()).isEqualTo(system);
      }
      assertThat(partitions)
          .as("writes after the promotion are acknowledged on its timeline")
          .anyMatch(p -> p.path("storage").path("acknowledgedOn").path("timeline").asInt() == 2);
      // Every acknowledged consumer commit: its checkpoint (or a later one) is what the partition
      // serves.
      int checkpointsBehind = 0;
      for (com.fasterxml.jackson.databind.JsonNode p : partitions) {
        long served = -1;
        for (com.fasterxml.jackson.databind.JsonNode c : p.path("consumers")) {
          if (c.path("consumer").asText().equals(Projector.CONSUMER)) {
            served = c.path("checkpoint").asLong();
          }
        }
        long committed = projector.committed.getOrDefault(p.path("partition").asInt(), 0L);
        if (served < committed) {
          checkpointsBehind++;
        }
      }
      LOG.info(
          String.format(
              "postgres-failover: consumer commits acknowledged=%d (after promotion %d)"
                  + " checkpoints-behind=%d",
              projector.commits.get(), projector.commitsAfter(promoted), checkpointsBehind));
      assertThat(projector.commits.get()).as("consumer commits acknowledged").isPositive();
      assertThat(projector.commitsAfter(promoted))
          .as("consumer commits acknowledged after the promotion")
          .isPositive();
      assertThat(checkpointsBehind)
          .as("partitions serving a consumer checkpoint below an acknowledged commit")
          .isZero();
      // Receipts: a retry of an acknowledged write is answered from its receipt, not written again.
      int receipts = 0;
      for (long[] w : ackedWrites) {
        if (w[0] % 7 != 0) {
          continue;
        }
        HttpResponse<String> again =
            node.sendIdempotent(
                "PUT",
                "/v1/documents/c/d-" + (w[0] % IDS),
                "{\"i\":" + w[0] + "}",
                Map.of("Idempotency-Key", "k-" + w[0], "Content-Type", "application/json"));
        assertThat(again.statusCode()).isEqualTo(200);
        assertThat(again.body()).contains("\"replayed\":true").contains("\"revision\":" + w[1]);
        receipts++;
      }
      LOG.info(
          String.format(
              "postgres-failover: partitions serving after recovery=%d outbox-entries=%d"
                  + " receipts-replayed=%d",
              partitions.size(), entries, receipts));

      // The fenced old primary comes back as a standby (pg_rewind): three copies again. Writes
      // after that reach every member.
      rf3(home, "rejoin");
      for (int i = 0; i < 20; i++) {
        // With its Idempotency-Key a repetition is answered from the receipt.
        HttpResponse<String> r =
            node.sendIdempotent(
                "PUT",
                "/v1/documents/c/after-rejoin-" + i,
                "{\"n\":" + i + "}",
                Map.of("Idempotency-Key", "after-rejoin-" + i));
        assertThat(r.statusCode()).as("write after the rejoin").isEqualTo(200);
      }
      Path members = tmp.resolve("pg");
      String primary = Files.readString(members.resolve("primary")).trim();
      String lsn = member(members, primary, pg, "SELECT pg_current_wal_lsn()::text");
      String journal =
          member(
              members,
              primary,
              pg,
              "SELECT count(*) || '/' || max(ordering) FROM weir.event_journal");
      Map<String, String> copies = new java.util.TreeMap<>();
      for (String m : new String[] {"p", "s1", "s2"}) {
        long deadline2 = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!"t"
            .equals(
                member(
                    members,
                    m,
                    pg,
                    "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() >= '"
                        + lsn
                        + "'::pg_lsn ELSE true END"))) {
          assertThat(System.nanoTime())
              .as("member %s replays the primary's WAL", m)
              .isLessThan(deadline2);
          Thread.sleep(100);
        }
        copies.put(
            m,
            member(
                members, m, pg, "SELECT count(*) || '/' || max(ordering) FROM weir.event_journal"));
      }
      LOG.info(
          String.format(
              "postgres-rejoin: old primary rewound and streaming; journal rows/max ordering per member %s",
              copies));
      assertThat(copies.values()).as("every member holds the same journal").containsOnly(journal);
    } finally {
      nodes.forEach(NodeProcess::close);
      rf3(home, "destroy");
      deleteTree(tmp);
    }
  }

  /**
   * A failover to a standby that lagged: synchronous replication is switched off and both standbys
   * stop receiving WAL, more writes are acknowledged on the primary alone (the node requires one
   * copy, so it lets them go), the primary dies and a standby without those writes is promoted. The
   * node sees the storage's new timeline, every partition recovers from the promoted copy and
   * checks its journal against the mark of what it acknowledged: every write the storage lost must
   * lie in a partition halted {@code storage-behind} (a write there answers 503 storage-behind),
   * never be silently gone from a partition that serves. Accepting the loss lets those partitions
   * write again.
   */
  @Test
  void aFailoverToALaggingStandbyHaltsTheAffectedPartitionsInsteadOfLosingSilently()
      throws Exception {
    Path tmp = Files.createTempDirectory("weir-pg-rf3-lag");
    Map<String, String> home = rf3Home(tmp);
    try {
      Map<String, String> pg = rf3(home, "start");
      Path members = tmp.resolve("pg");
      NodeProcess node = startNode("pg-lagging", pg, tmp, 1);
      int early = 40;
      int late = 60;
      for (int i = 0; i < early; i++) {
        assertThat(put(node, "early-" + i, 1).statusCode()).isEqualTo(200);
      }
      // The standbys stop here: no synchronous standby, no WAL receiver on either.
      String primary = Files.readString(members.resolve("primary")).trim();
      execute(members, primary, pg, "ALTER SYSTEM SET synchronous_standby_names = ''");
      execute(members, primary, pg, "SELECT pg_reload_conf()");
      for (String m : new String[] {"s1", "s2"}) {
        if (!m.equals(primary)) {
          execute(members, m, pg, "ALTER SYSTEM SET primary_conninfo = ''");
          execute(members, m, pg, "SELECT pg_reload_conf()");
        }
      }
      await("the standbys stop receiving")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(100))
          .until(
              () -> member(members, primary, pg, "SELECT count(*) FROM pg_stat_replication"),
              "0"::equals);
      Map<String, Long> acknowledged = new HashMap<>();
      for (int i = 0; i < late; i++) {
        HttpResponse<String> r = put(node, "late-" + i, 1);
        assertThat(r.statusCode()).as("a write on the primary alone").isEqualTo(200);
        acknowledged.put("late-" + i, 1L);
      }
      rf3(home, "kill-primary");
      rf3(home, "promote");

      // Every partition recovers from the promoted copy and settles: serving or storage-behind,
      // its documents table caught up with the copy's journal (never ahead of it: the writers of
      // the incarnations before the failover are refused, ADR 0060), so reads are answered.
      // A status request is a message: it makes each partition notice the new storage.
      Map<Integer, String> states = new java.util.TreeMap<>();
      for (com.fasterxml.jackson.databind.JsonNode p :
          await(
                  "partitions settle after the failover: serving or storage-behind, their tables"
                      + " running")
              .atMost(Duration.ofSeconds(180))
              .pollInterval(Duration.ofMillis(250))
              .until(
                  () -> partitions(node),
                  list ->
                      list.size() == PARTITIONS
                          && states(list)
                              .allMatch(s -> s.equals("serving") || s.equals("storage-behind"))
                          && states(list).anyMatch("storage-behind"::equals)
                          && list.stream()
                              .allMatch(
                                  p ->
                                      p.path("documentsTable")
                                          .path("state")
                                          .asText()
                                          .equals("running")))) {
        states.put(p.path("partition").asInt(), p.path("storage").path("state").asText());
        if (p.path("storage").path("state").asText().equals("storage-behind")) {
          // Where the lost tail was acknowledged, and where the journal was found without it.
          assertThat(p.path("storage").path("acknowledgedOn").path("timeline").asInt())
              .isEqualTo(1);
          assertThat(p.path("storage").path("checkedOn").path("timeline").asInt()).isEqualTo(2);
        }
      }

      int lost = 0;
      int silent = 0;
      for (Map.Entry<String, Long> ack : acknowledged.entrySet()) {
        HttpResponse<String> read = call(node, "/v1/documents/c/" + ack.getKey());
        if (read.statusCode() == 200) {
          continue;
        }
        lost++;
        HttpResponse<String> write =
            node.sendOnce(
                "PUT",
                "/v1/documents/c/" + ack.getKey(),
                "{\"n\":2}",
                Map.of("Idempotency-Key", ack.getKey() + "-2", "Content-Type", "application/json"));
        if (!(write.statusCode() == 503 && write.body().contains("\"storage-behind\""))) {
          silent++;
        }
      }
      long behind = states.values().stream().filter("storage-behind"::equals).count();
      LOG.info(
          String.format(
              "postgres-lagging-standby: acknowledged-on-one-copy=%d lost=%d silent-loss=%d"
                  + " partitions-behind=%d of %d",
              acknowledged.size(), lost, silent, behind, PARTITIONS));
      assertThat(lost).as("the promoted standby lacks the late writes").isPositive();
      assertThat(silent)
          .as("lost writes in a partition that serves as if nothing happened")
          .isZero();

      // The operator accepts the loss: new incarnations, writes go again.
      for (Map.Entry<Integer, String> p : states.entrySet()) {
        if (p.getValue().equals("storage-behind")) {
          HttpResponse<String> refused =
              node.sendOnce(
                  "POST",
                  "/admin/partitions/" + p.getKey() + "/accept-storage-loss",
                  null,
                  Map.of());
          assertThat(refused.statusCode()).as("without the confirmation").isEqualTo(400);
          HttpResponse<String> accepted =
              node.sendOnce(
                  "POST",
                  "/admin/partitions/" + p.getKey() + "/accept-storage-loss?confirm=" + p.getKey(),
                  null,
                  Map.of());
          assertThat(accepted.statusCode()).as(accepted.body()).isEqualTo(200);
        }
      }
      for (String id : acknowledged.keySet()) {
        assertThat(put(node, id, 3).statusCode())
            .as("a write after the loss was accepted")
            .isEqualTo(200);
      }
    } finally {
      nodes.forEach(NodeProcess::close);
      nodes.clear();
      rf3(home, "destroy");
      deleteTree(tmp);
    }
  }

  /**
   * A projection consumer on every partition: reads a batch, commits it, and records the checkpoint
   * of every commit the node acknowledged. A commit without an answer is read again: the partition
   * then answers from where it stands (the commit went through or not), never below an acknowledged
   * checkpoint.
   */
  private static final class Projector extends Thread {
    static final String CONSUMER = "failover-projection";
    final Map<Integer, Long> committed = new ConcurrentHashMap<>();
    final AtomicInteger commits = new AtomicInteger();
    final java.util.Queue<Long> commitTimes = new java.util.concurrent.ConcurrentLinkedQueue<>();
    final AtomicReference<Throwable> error = new AtomicReference<>();
    private final NodeProcess node;
    private final AtomicBoolean stop;

    Projector(NodeProcess node, AtomicBoolean stop) throws Exception {
      super("pg-failover-projection");
      setDaemon(true);
      this.node = node;
      this.stop = stop;
      for (int p = 0; p < PARTITIONS; p++) {
        HttpResponse<String> configured =
            node.sendIdempotent(
                "POST",
                "/admin/projections/configure",
                "{\"partition\":" + p + ",\"consumer\":\"" + CONSUMER + "\",\"generation\":1}",
                Map.of("Content-Type", "application/json"));
        assertThat(configured.statusCode()).as(configured.body()).isEqualTo(201);
      }
    }

    long commitsAfter(long nanos) {
      return commitTimes.stream().filter(t -> t > nanos).count();
    }

    @Override
    public void run() {
      try {
        while (!stop.get()) {
          for (int p = 0; p < PARTITIONS && !stop.get(); p++) {
            Optional<HttpResponse<String>> read =
                node.post(
                    "/admin/projections/read",
                    "{\"partition\":"
                        + p
                        + ",\"consumer\":\""
                        + CONSUMER
                        + "\",\"generation\":1,\"maxEntries\":50}");
            if (read.isEmpty() || read.get().statusCode() != 200) {
              Thread.sleep(50);
              continue;
            }
            com.fasterxml.jackson.databind.JsonNode batch = JSON.readTree(read.get().body());
            long start = batch.path("start").asLong();
            assertThat(start)
                .as("partition %s reads from at least its acknowledged checkpoint", p)
                .isGreaterThanOrEqualTo(committed.getOrDefault(p, 0L));
            if (batch.path("through").asLong() == start) {
              continue;
            }
            Optional<HttpResponse<String>> commit =
                node.post(
                    "/admin/projections/commit",
                    "{\"token\":\"" + batch.path("token").asText() + "\"}");
            if (commit.isPresent() && commit.get().statusCode() == 200) {
              long checkpoint = JSON.readTree(commit.get().body()).path("checkpoint").asLong();
              committed.merge(p, checkpoint, Math::max);
              commits.incrementAndGet();
              commitTimes.add(System.nanoTime());
            }
          }
          Thread.sleep(20);
        }
      } catch (Throwable t) {
        error.set(t);
      }
    }
  }

  /**
   * A commit whose synchronous wait was cancelled is visible on the primary alone (PostgreSQL warns
   * and keeps it). A partition that recovers afterwards would serve it as if durable; so it first
   * waits until the standbys' flushed positions pass the primary's WAL position ({@code
   * StorageSystem.settled}, ADR 0036). Here both standbys' WAL receivers are stopped (SIGSTOP: the
   * primary still lists them streaming, with their flushed positions frozen), a commit waits for
   * them, is cancelled, and is visible on the primary; the settle wait must not end while the
   * receivers are stopped, and must end once they run again.
   */
  @Test
  void theWaitAfterRecoveryOutlastsACommitWhoseSynchronousWaitWasCancelled() throws Exception {
    Path tmp = Files.createTempDirectory("weir-pg-rf3-cancel");
    Map<String, String> home = rf3Home(tmp);
    var probes = java.util.concurrent.Executors.newSingleThreadExecutor();
    List<String> stopped = new java.util.ArrayList<>();
    try {
      Map<String, String> pg = rf3(home, "start");
      Path members = tmp.resolve("pg");
      String primary = Files.readString(members.resolve("primary")).trim();
      execute(members, primary, pg, "CREATE TABLE cancelled_wait (x int)");
      org.postgresql.ds.PGSimpleDataSource data = new org.postgresql.ds.PGSimpleDataSource();
      data.setUrl(memberUrl(members, primary));
      data.setUser(pg.get("WEIR_PG_USER"));
      data.setPassword(pg.get("WEIR_PG_PASSWORD"));
      // Settled now: both standbys stream and hold everything.
      StorageSystem.settled(data, 1, Duration.ofSeconds(60), probes)
          .toCompletableFuture()
          .get(90, TimeUnit.SECONDS);

      for (String m : new String[] {"s1", "s2"}) {
        String pid = member(members, m, pg, "SELECT pid FROM pg_stat_wal_receiver");
        assertThat(pid).as("standby %s receives WAL", m).isNotNull();
        NodeProcess.signal("STOP", Long.parseLong(pid));
        stopped.add(pid);
      }
      // The commit waits for a standby that cannot answer; cancelling the wait keeps it locally.
      java.util.concurrent.CompletableFuture<String> insert =
          java.util.concurrent.CompletableFuture.supplyAsync(
              () -> {
                try (java.sql.Connection c = connect(members, primary, pg);
                    java.sql.Statement st = c.createStatement()) {
                  st.execute("INSERT INTO cancelled_wait VALUES (1)");
                  java.sql.SQLWarning w = st.getWarnings();
                  return w == null ? "no warning" : w.getMessage();
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });
      await("the commit waits for the standbys")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(100))
          .until(
              () ->
                  member(
                      members,
                      primary,
                      pg,
                      "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"),
              "1"::equals);
      execute(
          members,
          primary,
          pg,
          "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
      assertThat(insert.get(60, TimeUnit.SECONDS))
          .as("PostgreSQL keeps the commit locally and warns")
          .contains("canceling wait for synchronous replication");
      assertThat(member(members, primary, pg, "SELECT count(*) FROM cancelled_wait"))
          .as("the cancelled commit is visible on the primary")
          .isEqualTo("1");

      java.util.concurrent.CompletableFuture<Void> settled =
          StorageSystem.settled(data, 1, Duration.ofSeconds(120), probes).toCompletableFuture();
      // Both receivers are stopped: no standby's flushed position can pass the commit.
      await("not settled while the cancelled commit is on the primary alone")
          .during(Duration.ofSeconds(3))
          .atMost(Duration.ofSeconds(10))
          .pollInterval(Duration.ofMillis(100))
          .until(() -> !settled.isDone());
      for (String pid : stopped) {
        NodeProcess.signal("CONT", Long.parseLong(pid));
      }
      stopped.clear();
      settled.get(120, TimeUnit.SECONDS);
      String onStandby =
          await("a standby replays the commit")
              .atMost(Duration.ofSeconds(60))
              .pollInterval(Duration.ofMillis(100))
              .until(
                  () -> member(members, "s1", pg, "SELECT count(*) FROM cancelled_wait"),
                  "1"::equals);
      LOG.info(
          String.format(
              "postgres-cancelled-wait: commit visible on the primary alone; settle waited for the"
                  + " standbys; standby s1 rows=%s",
              onStandby));
    } finally {
      for (String pid : stopped) {
        NodeProcess.signal("CONT", Long.parseLong(pid));
      }
      probes.shutdownNow();
      rf3(home, "destroy");
      deleteTree(tmp);
    }
  }

  /** The environment of an RF3 cluster of this test's own in {@code tmp}. */
  private static Map<String, String> rf3Home(Path tmp) throws IOException {
    // As root the servers run as the postgres user, which must be able to enter the home.
    Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
    return Map.of(
        "WEIR_PG_RF3_HOME",
        tmp.resolve("pg").toString(),
        "WEIR_PG_RF3_PORT_BASE",
        Integer.toString(TestPorts.freeBlock(8)));
  }

  /** A node on the RF3 cluster {@code pg} requiring {@code copies}, ready with its partitions. */
  private NodeProcess startNode(String name, Map<String, String> pg, Path tmp, int copies)
      throws Exception {
    Path config = tmp.resolve("node.conf");
    Files.writeString(config, "weir.partitions.count = " + PARTITIONS + "\n");
    NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec(name)
                .env("WEIR_PG_URL", pg.get("WEIR_PG_URL"))
                .env("WEIR_PG_USER", pg.get("WEIR_PG_USER"))
                .env("WEIR_PG_PASSWORD", pg.get("WEIR_PG_PASSWORD"))
                .env("WEIR_REQUIRED_COPIES", Integer.toString(copies))
                .args("--config", config.toString()));
    nodes.add(node);
    awaitReady(node, PARTITIONS);
    return node;
  }

  /** Every partition's status from the node, or none while it does not answer. */
  private static List<com.fasterxml.jackson.databind.JsonNode> partitions(NodeProcess node)
      throws IOException {
    Optional<HttpResponse<String>> r = node.send("GET", "/admin/outbox/status", null, Map.of());
    List<com.fasterxml.jackson.databind.JsonNode> list = new java.util.ArrayList<>();
    if (r.isPresent() && r.get().statusCode() == 200) {
      JSON.readTree(r.get().body()).forEach(list::add);
    }
    return list;
  }

  private static Stream<String> states(List<com.fasterxml.jackson.databind.JsonNode> partitions) {
    return partitions.stream().map(p -> p.path("storage").path("state").asText());
  }

  private static final com.fasterxml.jackson.databind.ObjectMapper JSON =
      new com.fasterxml.jackson.databind.ObjectMapper();

  /**
   * One PUT of document {@code id} with its own Idempotency-Key, retried while it gets no answer.
   */
  private static HttpResponse<String> put(NodeProcess node, String id, int n) {
    return node.sendIdempotent(
        "PUT",
        "/v1/documents/c/" + id,
        "{\"n\":" + n + "}",
        Map.of("Idempotency-Key", id + "-" + n, "Content-Type", "application/json"));
  }

  /** Runs a statement on member {@code m} (database weir). */
  private static void execute(Path home, String m, Map<String, String> pg, String sql)
      throws Exception {
    try (java.sql.Connection c = connect(home, m, pg)) {
      c.createStatement().execute(sql);
    }
  }

  private static java.sql.Connection connect(Path home, String m, Map<String, String> pg)
      throws Exception {
    return java.sql.DriverManager.getConnection(
        memberUrl(home, m), pg.get("WEIR_PG_USER"), pg.get("WEIR_PG_PASSWORD"));
  }

  /** The JDBC URL of member {@code m}'s database weir. */
  private static String memberUrl(Path home, String m) throws IOException {
    return "jdbc:postgresql://127.0.0.1:"
        + Files.readString(home.resolve(m).resolve("port")).trim()
        + "/weir";
  }

  /** GET through the node, retried while it answers 503 or not at all. */
  private static HttpResponse<String> call(NodeProcess node, String path) {
    return node.sendIdempotent("GET", path, null, Map.of(), Duration.ofSeconds(120));
  }

  private static void awaitAcks(AtomicInteger acks, int n, AtomicReference<Throwable> writerError)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (acks.get() < n) {
      assertThat(writerError.get()).as("the writer failed").isNull();
      assertThat(System.nanoTime())
          .as("%d writes acknowledged before the crash", n)
          .isLessThan(deadline);
      Thread.sleep(50);
    }
  }

  /** One value from member {@code m} of the RF3 cluster in {@code home} (database weir). */
  private static String member(Path home, String m, Map<String, String> pg, String query)
      throws Exception {
    try (java.sql.Connection c = connect(home, m, pg);
        java.sql.ResultSet rs = c.createStatement().executeQuery(query)) {
      rs.next();
      return rs.getString(1);
    }
  }

  /**
   * Runs {@code deploy/bin/pg-rf3.sh <command>} and returns the {@code export} lines it printed.
   */
  private static Map<String, String> rf3(Map<String, String> env, String command)
      throws IOException, InterruptedException {
    ProcessBuilder pb =
        new ProcessBuilder(
                "bash", TestPostgres.repoRoot().resolve("deploy/bin/pg-rf3.sh").toString(), command)
            .redirectError(ProcessBuilder.Redirect.INHERIT);
    pb.environment().putAll(env);
    Process p = pb.start();
    Map<String, String> out = new HashMap<>();
    try (BufferedReader r =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = r.readLine()) != null) {
        if (line.startsWith("export ")) {
          int eq = line.indexOf('=');
          String value = line.substring(eq + 1);
          if (value.startsWith("'") && value.endsWith("'")) {
            value = value.substring(1, value.length() - 1);
          }
          out.put(line.substring("export ".length(), eq), value);
        }
      }
    }
    if (!p.waitFor(180, TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new IllegalStateException(
          "deploy/bin/pg-rf3.sh " + command + " failed; see its output above");
    }
    return out;
  }

  private static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> s = Files.walk(dir)) {
      s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
