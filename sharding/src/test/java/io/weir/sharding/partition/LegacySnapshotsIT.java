package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.apache.pekko.serialization.Serializers;
import org.junit.jupiter.api.Test;

/**
 * Upgrading a partition whose snapshot holds every body (the format before ADR 0032) against a real
 * PostgreSQL: a move cut short after three batches resumes after the documents it wrote, every
 * document lands in the table as the old snapshot held it (rows a table of the earlier release held
 * are replaced), the snapshot becomes index-only, and the partition recovers from it and serves and
 * writes.
 */
class LegacySnapshotsIT {
  private static final int P = 3;
  private static final int DOCUMENTS = 20_000;
  private static final long SEQUENCE = 7_000;
  private static final Duration WAIT = Duration.ofSeconds(60);

  @Test
  void aMoveCutShortResumesAndThePartitionRecoversFromTheIndexOnlySnapshot() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("legacy_snapshots");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "legacy-snapshots-it")) {
      ActorTestKit kit = ActorTestKit.create("legacy-snapshots", config(db));
      try {
        Map<String, Document> documents = oldSnapshot(kit, db);
        // A documents table of the earlier release, ahead of the snapshot: replaced by the move.
        sql(
            db,
            "INSERT INTO weir.documents VALUES (3, 'orders', 'stale', 9, '{}', NULL, false, 9999)",
            "INSERT INTO weir.document_positions VALUES (3, 9999, '{}', 0)");

        SqlLegacySnapshots legacy = (SqlLegacySnapshots) jdbc.wiring().legacySnapshots();
        AtomicInteger batches = new AtomicInteger();
        Throwable cut =
            catchThrowable(
                () ->
                    legacy
                        .upgrade(
                            P,
                            (moved, total) -> {
                              if (batches.incrementAndGet() == 3) {
                                throw new IllegalStateException("interrupted");
                              }
                            })
                        .toCompletableFuture()
                        .get());
        assertThat(cut).as("the first move stops after three batches").isNotNull();
        assertThat(longValue(db, "SELECT documents_done FROM weir.snapshot_upgrades"))
            .isEqualTo(3 * SqlLegacySnapshots.BATCH);
        assertThat(longValue(db, "SELECT snapshot_ser_id FROM weir.snapshot"))
            .as("the old snapshot stays until the move is over")
            .isEqualTo(SqlLegacySnapshots.LEGACY_SERIALIZER);

        List<Long> progress = new ArrayList<>();
        assertThat(
                legacy
                    .upgrade(P, (moved, total) -> progress.add(moved))
                    .toCompletableFuture()
                    .get())
            .isTrue();
        assertThat(progress.get(0))
            .as("resumed after the documents already moved")
            .isGreaterThan(3L * SqlLegacySnapshots.BATCH);
        assertThat(progress)
            .as("none moved twice: the count never passes the snapshot's documents")
            .allMatch(moved -> moved <= DOCUMENTS)
            .contains((long) DOCUMENTS);
        assertThat(longValue(db, "SELECT snapshot_ser_id FROM weir.snapshot"))
            .isEqualTo(PartitionSnapshotSerializer.IDENTIFIER);
        assertThat(longValue(db, "SELECT count(*) FROM weir.snapshot_upgrades")).isZero();
        assertThat(longValue(db, "SELECT applied_through FROM weir.document_positions"))
            .isEqualTo(SEQUENCE);
        assertThat(longValue(db, "SELECT outbox_next FROM weir.document_positions"))
            .isEqualTo(SEQUENCE + 1);
        assertThat(table(db)).as("every document as the old snapshot held it").isEqualTo(documents);
        assertThat(legacy.upgrade(P, (moved, total) -> {}).toCompletableFuture().get())
            .as("nothing to do any more")
            .isFalse();

        ActorRef<Command> p = kit.spawn(PartitionEntity.create(P, jdbc.wiring()));
        TestProbe<PartitionStatus> status = kit.createTestProbe();
        await()
            .atMost(WAIT)
            .until(
                () -> {
                  p.tell(new GetStatus(status.ref()));
                  PartitionStatus s = status.receiveMessage(WAIT);
                  return s.table() != null && s.table().state().equals("running");
                });
        p.tell(new GetStatus(status.ref()));
        PartitionStatus s = status.receiveMessage(WAIT);
        assertThat(s.documents()).isEqualTo(DOCUMENTS);
        assertThat(s.journalEvents()).isEqualTo(SEQUENCE);
        TestProbe<DocumentReply> doc = kit.createTestProbe();
        for (String id : List.of("d-0", "d-7", "d-19999")) {
          p.tell(new GetDocument("orders", id, doc.ref()));
          assertThat(doc.receiveMessage(WAIT).document()).contains(documents.get(id));
        }
        TestProbe<FrameReply> frame = kit.createTestProbe();
        p.tell(
            new ApplyFrame(
                "after-upgrade",
                List.of(new Upsert("orders", "d-7", "{\"n\":\"new\"}", Optional.of(2L))),
                Optional.empty(),
                frame.ref()));
        assertThat(frame.receiveMessage(WAIT))
            .as("a write over a document the snapshot held, its before image from the table")
            .isEqualTo(new Applied("after-upgrade", SEQUENCE + 1, List.of(3L), false));
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  private static Config config(TestPostgres.TestDatabase db) {
    return ConfigFactory.load(
        db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
  }

  /**
   * Stores a snapshot of the old format at {@link #SEQUENCE}: {@link #DOCUMENTS} documents (every
   * tenth a tombstone with an owner), written by the Jackson serializer the old release used.
   */
  private static Map<String, Document> oldSnapshot(ActorTestKit kit, TestPostgres.TestDatabase db)
      throws Exception {
    HashMap<String, Document> byKey = new HashMap<>();
    Map<String, Document> byId = new TreeMap<>();
    for (int i = 0; i < DOCUMENTS; i++) {
      Document d =
          i % 10 == 7
              ? new Document("orders", "d-" + i, 2, null, true, "\"u" + (i % 3) + "\"")
              : new Document(
                  "orders", "d-" + i, 2, "{\"owner\":\"u" + (i % 3) + "\",\"t\":\"日本\"}", false);
      byKey.put(Partition.key(d.collection(), d.id()), d);
      byId.put(d.id(), d);
    }
    Partition.State old =
        new Partition.State(
            byKey,
            SEQUENCE + 1,
            1,
            0,
            SEQUENCE,
            new LinkedHashMap<>(),
            new HashMap<>(Map.of("slot", 42L)),
            new HashMap<>(),
            new TreeMap<>(),
            "incarnation-old",
            0,
            1_000,
            new Partition.SnapshotMark(SEQUENCE, 1_000),
            new HashMap<>(),
            new HashMap<>(Map.of("orders", new Partition.RowRule("owner", 1))),
            new HashMap<>(Map.of("orders", 1L)));
    Serialization serialization = SerializationExtension.get(kit.system());
    Serializer serializer = serialization.findSerializerFor(old);
    assertThat(serializer.identifier()).isEqualTo(SqlLegacySnapshots.LEGACY_SERIALIZER);
    try (Connection c = db.connect();
        PreparedStatement ps =
            c.prepareStatement(
                "INSERT INTO weir.snapshot (persistence_id, sequence_number, created,"
                    + " snapshot_ser_id, snapshot_ser_manifest, snapshot_payload)"
                    + " VALUES (?, ?, 0, ?, ?, ?)")) {
      ps.setString(1, Partition.persistenceId(P).id());
      ps.setLong(2, SEQUENCE);
      ps.setInt(3, serializer.identifier());
      ps.setString(4, Serializers.manifestFor(serializer, old));
      ps.setBytes(5, serializer.toBinary(old));
      ps.executeUpdate();
    }
    return byId;
  }

  private static Map<String, Document> table(TestPostgres.TestDatabase db) throws Exception {
    Map<String, Document> out = new TreeMap<>();
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT collection, id, revision, body, deleted, acl, journal_seq"
                        + " FROM weir.documents WHERE partition_id = "
                        + P)) {
      while (rs.next()) {
        assertThat(rs.getLong(7)).as("every row at the snapshot's sequence").isEqualTo(SEQUENCE);
        out.put(
            rs.getString(2),
            new Document(
                rs.getString(1),
                rs.getString(2),
                rs.getLong(3),
                rs.getString(4),
                rs.getBoolean(5),
                rs.getString(6)));
      }
    }
    return out;
  }

  private static long longValue(TestPostgres.TestDatabase db, String query) throws Exception {
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery(query)) {
      assertThat(rs.next()).as(query).isTrue();
      return rs.getLong(1);
    }
  }

  private static void sql(TestPostgres.TestDatabase db, String... statements) throws Exception {
    try (Connection c = db.connect()) {
      for (String s : statements) {
        c.createStatement().execute(s);
      }
    }
  }
}
