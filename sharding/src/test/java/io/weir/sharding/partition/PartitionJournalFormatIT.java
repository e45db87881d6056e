package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.Identifiers;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.serialization.SerializationFixtures;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.ConsumerProtocol.BatchCommitted;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerSpan;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.ReadProtocol.DocumentsReply;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.Types;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A partition recovers from journal and snapshot rows written by an earlier format: the rows of
 * {@code src/test/resources/serialization/v1/journal/partition.json} (the {@code event_journal} and
 * {@code snapshot} rows of one partition, payload bytes with their serializer id and manifest, as
 * the JDBC plugin stored them) are inserted into a fresh schema, the partition entity starts on
 * them, and its documents, outbox, consumers, row rules and watermarks are what they were when the
 * rows were captured.
 *
 * <p>The fixture holds a snapshot (taken by the partition's own policy after the default {@link
 * SnapshotPolicy#DEFAULT} number of events) and the events after it, which cover every kind of
 * frame: API frames with receipts, deletes, a split CDC slice, a truncate, initial and incremental
 * snapshot rows, a row rule, projection consumers (configure, commit, release) and a purge. The
 * journal rows up to the snapshot are left out, as the pruner deletes them once the snapshot covers
 * them and their entries are purged (they are: the first event after the snapshot purges them).
 *
 * <p>With {@code -Dweir.serialization.write-fixtures=true} and no fixture, the test writes it from
 * a run of the current code (about 1,000 frames: a minute at most) instead of failing.
 */
class PartitionJournalFormatIT {
  private static final int PARTITION = 7;
  private static final String PERSISTENCE_ID = Partition.persistenceId(PARTITION).id();
  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
  private static final long SLOT_A_LAST = 100_000 + SnapshotPolicy.DEFAULT.events() + 1;
  private static final long SLOT_B_LSN = 5_000;

  /**
   * Receipts that outlast the fixture: its rows were written long before the test runs, and a
   * receipt older than weir.partitions.receipts.ttl no longer answers a retry (ADR 0034).
   */
  private static final PartitionSettings LASTING =
      PartitionSettings.DEFAULTS.withReceipts(100L * 365 * 24 * 3_600_000, 1_000);

  /**
   * The journal format the current code writes: v1 held every body in the snapshot, v2 (ADR 0032)
   * holds the documents' index only.
   */
  private static final String CURRENT = "v2";

  private static Path fixture(String version) {
    return Path.of(System.getProperty("basedir", "."))
        .resolve("src/test/resources/serialization/" + version + "/journal/partition.json");
  }

  /**
   * v1's snapshot holds every body: the partition first moves them into the documents table ({@link
   * SqlLegacySnapshots}) and then recovers from the index-only snapshot that replaced it.
   */
  @ParameterizedTest
  @ValueSource(strings = {"v1", "v2"})
  void aPartitionRecoversFromTheStoredRowsOfEveryFormat(String version) throws Exception {
    if (!Files.exists(fixture(version))) {
      if (SerializationFixtures.writing() && version.equals(CURRENT)) {
        writeFixture();
      } else {
        fail(
            "no journal fixture "
                + fixture(version)
                + "; write the current format's with: mvn -o verify -pl sharding -Dit.test="
                + getClass().getSimpleName()
                + " -Dtest=none -Dsurefire.failIfNoSpecifiedTests=false -D"
                + SerializationFixtures.WRITE_PROPERTY
                + "=true (and commit it)");
      }
    }
    JsonNode stored = JSON.readTree(fixture(version).toFile());
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("journal_format_it");
        SerializationFixtures serialization = new SerializationFixtures("sharding")) {
      Config config = migrated(db);
      try (Connection c = db.connect()) {
        insert(c, "event_journal", stored.get("eventJournal"));
        insert(c, "snapshot", stored.get("snapshot"));
        if (stored.has("documents")) {
          insert(c, "documents", stored.get("documents"));
          insert(c, "document_positions", stored.get("documentPositions"));
        }
      }
      ActorTestKit kit = ActorTestKit.create("journal-format", config);
      JdbcPartitions jdbc = new JdbcPartitions(config, "journal-format-it");
      try {
        ActorRef<Command> p = kit.spawn(PartitionEntity.create(PARTITION, jdbc.wiring(LASTING)));
        // Every reply captured with the rows, decoded by the current code, is what the recovered
        // partition answers now.
        List<Object> now = observe(kit, p);
        Iterator<JsonNode> expected = stored.get("observed").iterator();
        for (Object reply : now) {
          JsonNode e = expected.next();
          Object then =
              serialization.deserialize(
                  new SerializationFixtures.Serialized(
                      e.get("serializerId").asInt(),
                      e.get("manifest").asText(),
                      Base64.getDecoder().decode(e.get("payload").asText())));
          // The documents table's status and the storage check are the only parts of an answer a
          // format may add to.
          assertThat(reply)
              .as("recovered " + reply.getClass().getSimpleName())
              .usingRecursiveComparison()
              .ignoringFields("table", "storage")
              .isEqualTo(then);
        }
        assertThat(expected.hasNext()).isFalse();

        // What the script wrote, stated independently of the captured replies.
        PartitionStatus status = (PartitionStatus) now.get(0);
        assertThat(status.outboxFirst())
            .as("purged through the snapshot's entries")
            .isEqualTo(SnapshotPolicy.DEFAULT.events() + 1);
        assertThat(status.watermarks())
            .containsEntry("slot-a", SLOT_A_LAST)
            .containsEntry("slot-b", SLOT_B_LSN);
        assertThat(status.consumers())
            .extracting(
                ConsumerProtocol.ConsumerView::name, ConsumerProtocol.ConsumerView::released)
            .containsExactly(
                org.assertj.core.groups.Tuple.tuple("old", true),
                org.assertj.core.groups.Tuple.tuple("proj", false));
        Map<String, Document> orders = byId((DocumentsReply) now.get(1));
        assertThat(orders).hasSize(50);
        assertThat(orders.get("o-2").deleted()).isTrue();
        assertThat(orders.get("o-1").body()).isEqualTo("{\"n\":1,\"owner\":\"alice\"}");
        assertThat(byId((DocumentsReply) now.get(2)).values())
            .as("customers truncated")
            .allMatch(Document::deleted);
        assertThat(byId((DocumentsReply) now.get(3)).get("p-1").revision())
            .as("incremental snapshot row")
            .isEqualTo(2);
        ConsumerSpan span = (ConsumerSpan) now.get(5);
        // Its checkpoint is the tail it committed; the batch's effect and one more frame came
        // after.
        assertThat(span.consumer().checkpoint()).isEqualTo(status.outboxNext() - 3);

        // The recovered partition goes on: receipts are there, and new entries follow the old ones.
        TestProbe<FrameReply> replies = kit.createTestProbe();
        p.tell(
            api("cmd-api-1", replies.ref(), new Upsert("orders", "o-1", "{}", Optional.empty())));
        assertThat(((Applied) replies.receiveMessage(WAIT)).replayed())
            .as("receipt recovered")
            .isTrue();
        p.tell(
            api(
                "cmd-after",
                replies.ref(),
                new Upsert("orders", "o-99", "{\"n\":99}", Optional.of(0L))));
        assertThat(((Applied) replies.receiveMessage(WAIT)).firstSequence())
            .isEqualTo(status.outboxNext());
        p.tell(
            cdc(
                new SourcePosition("slot-a", SLOT_A_LAST),
                replies.ref(),
                new Upsert("orders", "o-5", "{}", Optional.empty())));
        assertThat(replies.receiveMessage(WAIT))
            .as("at the recovered watermark")
            .isInstanceOf(PartitionProtocol.AlreadyApplied.class);

        // The new event went to the journal in the current encoding (ADR 0023), after the old rows
        // in
        // Jackson CBOR; a partition recovers from the mixed journal.
        try (Connection c = db.connect();
            PreparedStatement ps =
                c.prepareStatement(
                    "SELECT event_ser_id FROM weir.event_journal"
                        + " WHERE persistence_id = ? ORDER BY sequence_number DESC LIMIT 1")) {
          ps.setString(1, PERSISTENCE_ID);
          try (ResultSet rs = ps.executeQuery()) {
            assertThat(rs.next()).isTrue();
            assertThat(rs.getInt(1)).isEqualTo(PartitionEventSerializer.IDENTIFIER);
          }
        }
        kit.stop(p, WAIT);
        ActorRef<Command> again =
            kit.spawn(PartitionEntity.create(PARTITION, jdbc.wiring(LASTING)));
        TestProbe<ReadProtocol.DocumentReply> doc = kit.createTestProbe();
        again.tell(new ReadProtocol.GetDocument("orders", "o-99", doc.ref()));
        assertThat(doc.receiveMessage(WAIT).document())
            .as("written after the old rows, recovered from the mixed journal")
            .hasValueSatisfying(d -> assertThat(d.body()).isEqualTo("{\"n\":99}"));
        TestProbe<PartitionStatus> statusAgain = kit.createTestProbe();
        again.tell(new StatusProtocol.GetStatus(statusAgain.ref()));
        assertThat(statusAgain.receiveMessage(WAIT).outboxNext())
            .isEqualTo(status.outboxNext() + 1);
        try (Connection c = db.connect();
            PreparedStatement ps =
                c.prepareStatement(
                    "SELECT snapshot_ser_id, count(*) FROM weir.snapshot"
                        + " WHERE persistence_id = ? GROUP BY 1")) {
          ps.setString(1, PERSISTENCE_ID);
          try (ResultSet rs = ps.executeQuery()) {
            assertThat(rs.next()).isTrue();
            assertThat(rs.getInt(1))
                .as("every snapshot is of the index-only format now")
                .isEqualTo(PartitionSnapshotSerializer.IDENTIFIER);
            assertThat(rs.next()).isFalse();
          }
        }
      } finally {
        kit.shutdownTestKit();
        jdbc.close();
      }
    }
  }

  private static Map<String, Document> byId(DocumentsReply r) {
    return r.documents().stream()
        .collect(java.util.stream.Collectors.toMap(Document::id, Function.identity()));
  }

  private static Config migrated(TestPostgres.TestDatabase db) throws Exception {
    Config config =
        ConfigFactory.load(
            db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
    try (Database database =
        Database.create(PostgresSettings.create(config), "journal-format-it")) {
      SchemaMigrator.migrate(database.dataSource(), "weir");
    }
    return config;
  }

  /** The queries whose answers must survive recovery, in a fixed order. */
  private static List<Object> observe(ActorTestKit kit, ActorRef<Command> p) {
    List<Object> out = new ArrayList<>();
    TestProbe<PartitionStatus> status = kit.createTestProbe();
    PartitionStatus[] running = new PartitionStatus[1];
    org.awaitility.Awaitility.await("the partition serves")
        .atMost(WAIT)
        .until(
            () -> {
              p.tell(new StatusProtocol.GetStatus(status.ref()));
              running[0] = status.receiveMessage(WAIT);
              return running[0].table() != null && running[0].table().state().equals("running");
            });
    out.add(running[0]);
    TestProbe<DocumentsReply> docs = kit.createTestProbe();
    for (String collection : List.of("orders", "customers", "products", "summaries")) {
      p.tell(new ReadProtocol.GetDocuments(collection, null, 1_000, docs.ref()));
      out.add(docs.receiveMessage(WAIT));
    }
    TestProbe<ConsumerReply> consumer = kit.createTestProbe();
    p.tell(new ConsumerProtocol.ReadConsumer("proj", 1, 100, consumer.ref()));
    out.add(consumer.receiveMessage(WAIT));
    TestProbe<ReadProtocol.ChangesSpan> changes = kit.createTestProbe();
    p.tell(
        new ReadProtocol.ReadChanges(
            "orders", SnapshotPolicy.DEFAULT.events(), 100, changes.ref()));
    out.add(changes.receiveMessage(WAIT));
    TestProbe<ReadProtocol.Acls> acls = kit.createTestProbe();
    p.tell(new ReadProtocol.GetAcls("orders", List.of("o-1", "o-2", "o-3"), acls.ref()));
    out.add(acls.receiveMessage(WAIT));
    return out;
  }

  private static ApplyFrame api(
      String commandId, ActorRef<FrameReply> replyTo, PartitionProtocol.Mutation... m) {
    return new ApplyFrame(commandId, List.of(m), Optional.empty(), replyTo);
  }

  private static ApplyFrame cdc(
      SourcePosition source, ActorRef<FrameReply> replyTo, PartitionProtocol.Mutation... m) {
    return new ApplyFrame(null, List.of(m), Optional.of(source), replyTo);
  }

  // ---- Rows ----

  /** Inserts rows as stored: columns by name (validated), byte columns from base64. */
  private static void insert(Connection c, String table, JsonNode rows) throws Exception {
    assertThat(rows).as(table + " rows in the fixture").isNotEmpty();
    for (JsonNode row : rows) {
      List<String> columns = new ArrayList<>();
      row.fieldNames().forEachRemaining(columns::add);
      StringBuilder sql =
          new StringBuilder("INSERT INTO weir.")
              .append(Identifiers.quote(Identifiers.require("table", table)))
              .append(" (");
      for (int i = 0; i < columns.size(); i++) {
        sql.append(i == 0 ? "" : ", ")
            .append(Identifiers.quote(Identifiers.require("column", columns.get(i))));
      }
      sql.append(") VALUES (").append("?, ".repeat(columns.size() - 1)).append("?)");
      try (PreparedStatement ps = c.prepareStatement(sql.toString())) {
        for (int i = 0; i < columns.size(); i++) {
          JsonNode v = row.get(columns.get(i));
          if (v.isNull()) {
            ps.setNull(i + 1, Types.OTHER);
          } else if (v.isObject()) {
            ps.setBytes(i + 1, Base64.getDecoder().decode(v.get("base64").asText()));
          } else if (v.isBoolean()) {
            ps.setBoolean(i + 1, v.asBoolean());
          } else if (v.isIntegralNumber()) {
            ps.setLong(i + 1, v.asLong());
          } else {
            ps.setString(i + 1, v.asText());
          }
        }
        ps.executeUpdate();
      }
    }
  }

  /**
   * The partition's rows of {@code table} from sequence number {@code from} on, as JSON; the
   * ordering column left out.
   */
  private static ArrayNode dump(Connection c, String table, long from) throws Exception {
    ArrayNode out = JSON.createArrayNode();
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT * FROM weir."
                + Identifiers.quote(table)
                + " WHERE persistence_id = ? AND sequence_number >= ? ORDER BY sequence_number")) {
      ps.setString(1, PERSISTENCE_ID);
      ps.setLong(2, from);
      try (ResultSet rs = ps.executeQuery()) {
        ResultSetMetaData md = rs.getMetaData();
        while (rs.next()) {
          ObjectNode row = out.addObject();
          for (int i = 1; i <= md.getColumnCount(); i++) {
            String name = md.getColumnName(i);
            int type = md.getColumnType(i);
            if (name.equals("ordering")) {
              continue;
            }
            Object v = rs.getObject(i);
            if (v == null) {
              row.putNull(name);
            } else if (type == Types.BINARY
                || type == Types.VARBINARY
                || type == Types.LONGVARBINARY) {
              row.putObject(name).put("base64", Base64.getEncoder().encodeToString(rs.getBytes(i)));
            } else {
              row.set(name, JSON.valueToTree(v));
            }
          }
        }
      }
    }
    return out;
  }

  /** The partition's rows of a documents table, as JSON. */
  private static ArrayNode rows(Connection c, String table) throws Exception {
    ArrayNode out = JSON.createArrayNode();
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT * FROM weir."
                + Identifiers.quote(table)
                + " WHERE partition_id = ? ORDER BY 1, 2"
                + (table.equals("documents") ? ", 3" : ""))) {
      ps.setInt(1, PARTITION);
      try (ResultSet rs = ps.executeQuery()) {
        ResultSetMetaData md = rs.getMetaData();
        while (rs.next()) {
          ObjectNode row = out.addObject();
          for (int i = 1; i <= md.getColumnCount(); i++) {
            Object v = rs.getObject(i);
            if (v == null) {
              row.putNull(md.getColumnName(i));
            } else {
              row.set(md.getColumnName(i), JSON.valueToTree(v));
            }
          }
        }
      }
    }
    return out;
  }

  // ---- Writing the fixture (once per format) ----

  private static void writeFixture() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("journal_format_gen");
        SerializationFixtures serialization = new SerializationFixtures("sharding")) {
      Config config = migrated(db);
      ObjectNode doc = JSON.createObjectNode();
      doc.put("persistenceId", PERSISTENCE_ID);
      ActorTestKit kit = ActorTestKit.create("journal-format-gen", config);
      JdbcPartitions jdbc = new JdbcPartitions(config, "journal-format-gen");
      try {
        ActorRef<Command> p = kit.spawn(PartitionEntity.create(PARTITION, jdbc.wiring(LASTING)));
        script(kit, p);
        ArrayNode observed = doc.putArray("observed");
        for (Object reply : observe(kit, p)) {
          SerializationFixtures.Serialized s = serialization.serialize(reply);
          ObjectNode n = observed.addObject();
          n.put("serializerId", s.serializerId());
          n.put("manifest", s.manifest());
          n.put("payload", Base64.getEncoder().encodeToString(s.payload()));
        }
      } finally {
        kit.shutdownTestKit();
        jdbc.close();
      }
      try (Connection c = db.connect()) {
        ArrayNode snapshots = dump(c, "snapshot", 0);
        assertThat(snapshots).as("a snapshot by the partition's policy").isNotEmpty();
        long snapshotAt = snapshots.get(snapshots.size() - 1).get("sequence_number").asLong();
        doc.set("eventJournal", dump(c, "event_journal", snapshotAt + 1));
        doc.set("snapshot", snapshots);
        // The documents table as of its position: a partition recovers it from there.
        doc.set("documents", rows(c, "documents"));
        doc.set("documentPositions", rows(c, "document_positions"));
      }
      Files.createDirectories(fixture(CURRENT).getParent());
      Files.writeString(fixture(CURRENT), JSON.writeValueAsString(doc) + "\n");
    }
  }

  /** One event per step: each write is answered before the next is sent. */
  private static void script(ActorTestKit kit, ActorRef<Command> p) {
    TestProbe<FrameReply> frames = kit.createTestProbe();
    // 1,000 CDC frames: the partition snapshots after the last one.
    for (int i = 1; i <= SnapshotPolicy.DEFAULT.events(); i++) {
      p.tell(
          cdc(
              new SourcePosition("slot-a", 100_000 + i),
              frames.ref(),
              new Upsert("orders", "o-" + (i % 50), "{\"n\":" + i + "}", Optional.empty())));
      assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
    }
    TestProbe<PartitionProtocol.PurgeReply> purge = kit.createTestProbe();
    p.tell(new PartitionProtocol.PurgeOutbox(SnapshotPolicy.DEFAULT.events(), 10_000, purge.ref()));
    assertThat(purge.receiveMessage(WAIT)).isInstanceOf(PartitionProtocol.OutboxPurged.class);
    // API frames with receipts, a delete, a new collection.
    p.tell(
        api(
            "cmd-api-1",
            frames.ref(),
            new Upsert("orders", "o-1", "{\"n\":1,\"owner\":\"alice\"}", Optional.empty()),
            new Upsert("customers", "c-1", "{\"name\":\"c\"}", Optional.of(0L))));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
    p.tell(api("cmd-api-2", frames.ref(), new Delete("orders", "o-2", Optional.empty())));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
    // A CDC slice of another slot in two parts, then a truncate from the first slot.
    p.tell(
        cdc(
            new SourcePosition("slot-b", SLOT_B_LSN, 0, 1, false),
            frames.ref(),
            new Upsert("orders", "o-3", "{\"n\":3,\"owner\":\"bob\"}", Optional.empty())));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
    p.tell(
        cdc(
            new SourcePosition("slot-b", SLOT_B_LSN, 0, 2, true),
            frames.ref(),
            new Upsert("customers", "c-2", "{\"name\":\"d\"}", Optional.empty())));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
    p.tell(
        cdc(
            new SourcePosition(
                "slot-a", SLOT_A_LAST, 100_000 + SnapshotPolicy.DEFAULT.events(), 1, true),
            frames.ref(),
            new Truncate("customers")));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
    // An initial snapshot of a table, then an incremental one that changes a row.
    p.tell(
        new PartitionProtocol.LoadRows(
            List.of("products"),
            List.of(
                new Upsert("products", "p-1", "{\"price\":1}", Optional.empty()),
                new Upsert("products", "p-2", "{\"price\":2}", Optional.empty())),
            false,
            frames.ref()));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(PartitionProtocol.Loaded.class);
    p.tell(
        new PartitionProtocol.LoadRows(
            List.of(),
            List.of(new Upsert("products", "p-1", "{\"price\":3}", Optional.empty())),
            true,
            frames.ref()));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(PartitionProtocol.Loaded.class);
    // A row rule, and a change of a document's owner under it.
    TestProbe<PartitionProtocol.RowRuleReply> rule = kit.createTestProbe();
    p.tell(new PartitionProtocol.SetRowRule("orders", "owner", 1, rule.ref()));
    assertThat(rule.receiveMessage(WAIT).changed()).isTrue();
    p.tell(
        api(
            "cmd-api-3",
            frames.ref(),
            new Upsert("orders", "o-3", "{\"n\":3,\"owner\":\"carol\"}", Optional.empty())));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
    // Consumers: one commits a batch with an effect, another is released.
    TestProbe<ConsumerReply> consumer = kit.createTestProbe();
    p.tell(
        new ConsumerProtocol.ConfigureConsumer(
            "proj", 1, List.of("orders"), List.of(), Optional.empty(), consumer.ref()));
    assertThat(consumer.receiveMessage(WAIT))
        .isInstanceOf(ConsumerProtocol.ConsumerConfigured.class);
    p.tell(
        new ConsumerProtocol.ConfigureConsumer(
            "old", 1, List.of(), List.of("upsert"), Optional.empty(), consumer.ref()));
    assertThat(consumer.receiveMessage(WAIT))
        .isInstanceOf(ConsumerProtocol.ConsumerConfigured.class);
    p.tell(new ConsumerProtocol.ReadConsumer("proj", 1, 100, consumer.ref()));
    ConsumerSpan span = (ConsumerSpan) consumer.receiveMessage(WAIT);
    p.tell(
        new ConsumerProtocol.CommitBatch(
            "cmd-commit-1",
            "proj",
            1,
            span.incarnation(),
            span.consumer().checkpoint(),
            span.tail(),
            List.of(new Upsert("summaries", "s-1", "{\"orders\":3}", Optional.of(0L))),
            consumer.ref()));
    assertThat(consumer.receiveMessage(WAIT)).isInstanceOf(BatchCommitted.class);
    p.tell(new ConsumerProtocol.ReleaseConsumer("old", 1, consumer.ref()));
    assertThat(consumer.receiveMessage(WAIT)).isInstanceOf(ConsumerProtocol.ConsumerReleased.class);
    // One more entry after the committed batch.
    p.tell(
        api(
            "cmd-api-4",
            frames.ref(),
            new Upsert("orders", "o-4", "{\"n\":4,\"owner\":\"dan\"}", Optional.empty())));
    assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
  }
}
