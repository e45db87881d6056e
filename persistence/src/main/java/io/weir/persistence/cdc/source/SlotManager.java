package io.weir.persistence.cdc.source;

import io.weir.persistence.Identifiers;
import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;
import java.math.BigDecimal;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The checks and decisions made before a pipeline streams: publications exist and do not feed
 * Weir's writes back, the failover request is possible, and the slot is created, adopted or resumed
 * consistently with the sink's checkpoint and the recorded slot incarnation. Every refusal is a
 * {@link PipelineHaltException} with a typed reason. Blocking: run on an IO dispatcher.
 */
public final class SlotManager {
  private static final Logger log = LoggerFactory.getLogger(SlotManager.class);

  private final PipelineSettings settings;
  private final DataSource stateStore;
  private final String stateSchema;

  /**
   * @param stateStore Weir's own database, whose {@code <stateSchema>.cdc_slot} records slot
   *     incarnations
   */
  public SlotManager(PipelineSettings settings, DataSource stateStore, String stateSchema) {
    this.settings = settings;
    this.stateStore = stateStore;
    this.stateSchema = Identifiers.require("schema name", stateSchema);
  }

  /** What the source server says about the pipeline's environment. */
  public record ServerFacts(int versionNum, Duration walSenderTimeout) {}

  /**
   * Checks publications and the failover request on a normal (non-replication) connection to the
   * source database.
   */
  public ServerFacts checkSource(Connection source) throws SQLException {
    settings.validate();
    int version;
    Duration walSenderTimeout;
    try (PreparedStatement ps =
            source.prepareStatement(
                "SELECT current_setting('server_version_num')::int, "
                    + "extract(epoch FROM current_setting('wal_sender_timeout')::interval) * 1000");
        ResultSet rs = ps.executeQuery()) {
      rs.next();
      version = rs.getInt(1);
      walSenderTimeout = Duration.ofMillis(rs.getLong(2));
    }
    if (settings.failover() && version < 170000) {
      throw new PipelineHaltException(
          HaltReason.FAILOVER_UNSUPPORTED,
          "failover slots need PostgreSQL 17 or newer; this server is " + (version / 10000));
    }
    List<String> found = new ArrayList<>();
    boolean allTables = false;
    try (PreparedStatement ps =
        source.prepareStatement(
            "SELECT pubname, puballtables FROM pg_publication WHERE pubname = ANY(?)")) {
      ps.setArray(1, source.createArrayOf("text", settings.publications().toArray()));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          found.add(rs.getString(1));
          allTables |= rs.getBoolean(2);
        }
      }
    }
    for (String p : settings.publications()) {
      if (!found.contains(p)) {
        throw new PipelineHaltException(
            HaltReason.PUBLICATION_MISSING, "publication " + p + " does not exist");
      }
    }
    Array excluded = source.createArrayOf("text", settings.excludedSchemas().toArray());
    if (allTables) {
      try (PreparedStatement ps =
          source.prepareStatement(
              "SELECT nspname FROM pg_namespace WHERE nspname = ANY(?) LIMIT 1")) {
        ps.setArray(1, excluded);
        try (ResultSet rs = ps.executeQuery()) {
          if (rs.next()) {
            throw new PipelineHaltException(
                HaltReason.PUBLICATION_FEEDS_BACK,
                "a FOR ALL TABLES publication covers schema "
                    + rs.getString(1)
                    + ", which Weir writes to");
          }
        }
      }
    }
    try (PreparedStatement ps =
        source.prepareStatement(
            "SELECT pubname, schemaname, tablename FROM pg_publication_tables "
                + "WHERE pubname = ANY(?) AND schemaname = ANY(?) LIMIT 1")) {
      ps.setArray(1, source.createArrayOf("text", settings.publications().toArray()));
      ps.setArray(2, excluded);
      try (ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          throw new PipelineHaltException(
              HaltReason.PUBLICATION_FEEDS_BACK,
              "publication "
                  + rs.getString(1)
                  + " streams "
                  + rs.getString(2)
                  + "."
                  + rs.getString(3)
                  + ", which Weir writes to");
        }
      }
    }
    return new ServerFacts(version, walSenderTimeout);
  }

  /** The incarnation recorded for this pipeline, if any. */
  public Optional<SlotIncarnation> recordedIncarnation() throws SQLException {
    return recorded().map(Recorded::incarnation);
  }

  private record Recorded(
      SlotIncarnation incarnation, String slotName, String snapshotState, boolean restored) {
    boolean snapshotPending() {
      return "pending".equals(snapshotState);
    }
  }

  private Optional<Recorded> recorded() throws SQLException {
    try (Connection c = stateStore.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT incarnation, system_identifier, timeline, slot_name, snapshot_state, restored_at IS NOT NULL FROM "
                    + stateSchema
                    + ".cdc_slot WHERE pipeline = ?")) {
      ps.setString(1, settings.name());
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return Optional.empty();
        }
        return Optional.of(
            new Recorded(
                new SlotIncarnation(
                    rs.getObject(1, UUID.class),
                    rs.getBigDecimal(2).toBigInteger().longValue(),
                    rs.getInt(3)),
                rs.getString(4),
                rs.getString(5),
                rs.getBoolean(6)));
      }
    }
  }

  private record SlotRow(
      String plugin,
      String database,
      String walStatus,
      Lsn confirmedFlush,
      SlotJudgement.SlotFlags flags) {}

  private Optional<SlotRow> slot(Connection source) throws SQLException {
    return slot(source, settings.slot());
  }

  private Optional<SlotRow> slot(Connection source, String name) throws SQLException {
    try (PreparedStatement ps =
        source.prepareStatement(
            // failover and synced exist from PostgreSQL 17 on: read through to_jsonb, false before.
            "SELECT plugin, database, wal_status, confirmed_flush_lsn::text,"
                + " coalesce((to_jsonb(s) ->> 'failover')::boolean, false),"
                + " coalesce((to_jsonb(s) ->> 'synced')::boolean, false), pg_is_in_recovery()"
                + " FROM pg_replication_slots s WHERE slot_name = ? AND slot_type = 'logical'")) {
      ps.setString(1, name);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return Optional.empty();
        }
        String confirmed = rs.getString(4);
        return Optional.of(
            new SlotRow(
                rs.getString(1),
                rs.getString(2),
                rs.getString(3),
                confirmed == null ? Lsn.INVALID : Lsn.parse(confirmed),
                new SlotJudgement.SlotFlags(rs.getBoolean(5), rs.getBoolean(6), rs.getBoolean(7))));
      }
    }
  }

  /**
   * The incarnation to stream in, and the slot's confirmed position to start from.
   *
   * @param exported present when the slot was just created for an initial snapshot: read the tables
   *     at this snapshot (while the replication session stays idle), store the hand-off checkpoint,
   *     then stream from {@code confirmed}, the snapshot's consistent point
   */
  public record Prepared(
      SlotIncarnation incarnation, Lsn confirmed, Optional<ExportedSnapshot> exported) {
    public Prepared(SlotIncarnation incarnation, Lsn confirmed) {
      this(incarnation, confirmed, Optional.empty());
    }
  }

  /**
   * A snapshot exported by CREATE_REPLICATION_SLOT. It lives only while the replication session
   * that created the slot stays open and runs no other command.
   */
  public record ExportedSnapshot(String name, Lsn consistentPoint) {
    private static final Pattern SHAPE = Pattern.compile("[0-9A-Fa-f]+(-[0-9A-Fa-f]+){1,2}");

    public ExportedSnapshot {
      if (!SHAPE.matcher(name).matches()) {
        throw new PipelineHaltException(
            HaltReason.PROTOCOL_VIOLATION,
            "the server returned a snapshot name of unexpected shape");
      }
    }
  }

  /**
   * Decides how to stream, creating or adopting the slot where the rules allow.
   *
   * @param checkpoint the sink's durable checkpoint, if it has one
   */
  public Prepared prepareSlot(
      Connection source,
      Connection replicationSession,
      ReplicationConnection.SystemIdentity server,
      Optional<SinkCheckpoint> checkpoint)
      throws SQLException {
    Optional<Recorded> record = recorded();
    if (record.isPresent() && record.get().restored()) {
      // Weir's records (and the sink's state in schema weir) were rewound by a restore while the
      // slot
      // went on: its confirmed position may be past transactions the restored state never saw, and
      // streaming would skip them. Comparing positions cannot tell: an idle pipeline confirms past
      // WAL without transactions too.
      throw new PipelineHaltException(
          HaltReason.RESTORED_FROM_BACKUP,
          "this pipeline's records were restored from a backup while its slot went on; drop the pipeline"
              + " (DELETE /admin/pipelines/"
              + settings.name()
              + "?confirm="
              + settings.name()
              + ") and start it again");
    }
    if (record.isPresent()
        && record.get().slotName().equals(settings.slot())
        && record.get().snapshotPending()) {
      SlotIncarnation pending = record.get().incarnation();
      if (checkpoint.isPresent() && checkpoint.get().incarnation().equals(pending)) {
        // The hand-off checkpoint was stored before the crash: the snapshot is complete.
        markSnapshot("done");
        record = recorded();
      } else if (checkpoint.isPresent()) {
        throw new PipelineHaltException(
            HaltReason.INCARNATION_MISMATCH,
            "the sink's checkpoint belongs to another slot incarnation than the pending snapshot's");
      } else {
        // The exported snapshot died with the previous connection: the one sanctioned recreation.
        if (slot(source).isPresent()) {
          dropSlot(source);
        }
        log.warn(
            "pipeline {}: the initial snapshot did not reach its hand-off checkpoint; slot {} is dropped and "
                + "recreated and the snapshot starts again from the beginning",
            settings.name(),
            settings.slot());
        return createExporting(replicationSession, server);
      }
    }
    if (record.isPresent() && !record.get().slotName().equals(settings.slot())) {
      throw new PipelineHaltException(
          HaltReason.INCARNATION_MISMATCH,
          "this pipeline's checkpoints belong to slot "
              + record.get().slotName()
              + ", not "
              + settings.slot());
    }
    Optional<SlotIncarnation> recorded = record.map(Recorded::incarnation);
    Optional<SlotRow> slot = slot(source);
    String currentDb;
    try (ResultSet rs = source.createStatement().executeQuery("SELECT current_database()")) {
      rs.next();
      currentDb = rs.getString(1);
    }
    if (slot.isEmpty()) {
      if (checkpoint.isPresent()) {
        throw new PipelineHaltException(
            HaltReason.SLOT_LOST,
            "slot "
                + settings.slot()
                + " no longer exists but the sink has a checkpoint at "
                + checkpoint.get().commitLsn()
                + "; it is not recreated silently");
      }
      if (recorded.isPresent()) {
        // Weir created or adopted this slot before: whatever it held since is gone.
        throw new PipelineHaltException(
            HaltReason.SLOT_LOST,
            "slot "
                + settings.slot()
                + " that this pipeline streamed from no longer exists; it is not recreated silently");
      }
      if (settings.startMode() == StartMode.RESUME) {
        throw new PipelineHaltException(
            HaltReason.SLOT_MISSING,
            "slot " + settings.slot() + " does not exist (start mode resume)");
      }
      if (settings.startMode() == StartMode.SNAPSHOT) {
        return createExporting(replicationSession, server);
      }
      Lsn created = createSlot(source);
      SlotIncarnation incarnation =
          new SlotIncarnation(UUID.randomUUID(), server.systemIdentifier(), server.timeline());
      record(incarnation);
      log.info(
          "pipeline {}: created slot {} at {} (incarnation {})",
          settings.name(),
          settings.slot(),
          created,
          incarnation.id());
      return new Prepared(incarnation, created);
    }
    SlotRow row = slot.get();
    if (!"pgoutput".equals(row.plugin()) || !currentDb.equals(row.database())) {
      throw new PipelineHaltException(
          HaltReason.SLOT_INCOMPATIBLE,
          "slot " + settings.slot() + " uses another output plugin or database");
    }
    if ("lost".equals(row.walStatus())) {
      throw new PipelineHaltException(
          HaltReason.SLOT_LOST,
          "slot " + settings.slot() + " was invalidated by the server (wal_status lost)");
    }
    SlotJudgement.Resume resume =
        SlotJudgement.judge(settings.slot(), recorded, server, row.flags(), settings.failover());
    if (resume == SlotJudgement.Resume.PROMOTED) {
      SlotJudgement.requireOnTheNewHistory(
          recorded.get().timeline(),
          SlotJudgement.branchPoint(
              SlotJudgement.timelineHistory(replicationSession, server.timeline()),
              recorded.get().timeline()),
          checkpoint.map(SinkCheckpoint::commitLsn));
    }
    if (recorded.isEmpty()) {
      if (checkpoint.isPresent()) {
        throw new PipelineHaltException(
            HaltReason.INCARNATION_MISMATCH,
            "the sink has a checkpoint but Weir has no record of slot " + settings.slot());
      }
      if (settings.startMode() == StartMode.SNAPSHOT) {
        throw new PipelineHaltException(
            HaltReason.CONFLICTING_OPTIONS,
            "start mode snapshot creates its own slot, but slot "
                + settings.slot()
                + " already exists; drop it, or adopt it with go-forward and an incremental snapshot");
      }
      SlotIncarnation incarnation =
          new SlotIncarnation(UUID.randomUUID(), server.systemIdentifier(), server.timeline());
      record(incarnation);
      log.info(
          "pipeline {}: adopted existing slot {} (incarnation {})",
          settings.name(),
          settings.slot(),
          incarnation.id());
      return new Prepared(incarnation, row.confirmedFlush());
    }
    SlotIncarnation incarnation = recorded.get();
    if (resume == SlotJudgement.Resume.PROMOTED) {
      log.warn(
          "pipeline {}: the source was promoted (timeline {} -> {}); resuming failover slot {}",
          settings.name(),
          incarnation.timeline(),
          server.timeline(),
          settings.slot());
    }
    if (checkpoint.isPresent() && !checkpoint.get().incarnation().equals(incarnation)) {
      throw new PipelineHaltException(
          HaltReason.INCARNATION_MISMATCH,
          "the sink's checkpoint belongs to another slot incarnation");
    }
    return new Prepared(incarnation, row.confirmedFlush());
  }

  private Lsn createSlot(Connection source) throws SQLException {
    String sql =
        settings.failover()
            ? "SELECT lsn::text FROM pg_create_logical_replication_slot(?, 'pgoutput', false, false, true)"
            : "SELECT lsn::text FROM pg_create_logical_replication_slot(?, 'pgoutput')";
    try (PreparedStatement ps = source.prepareStatement(sql)) {
      ps.setString(1, settings.slot());
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return Lsn.parse(rs.getString(1));
      }
    }
  }

  /** Creates the slot with an exported snapshot and records its incarnation as snapshot-pending. */
  private Prepared createExporting(Connection session, ReplicationConnection.SystemIdentity server)
      throws SQLException {
    String command =
        settings.failover()
            ? "CREATE_REPLICATION_SLOT "
                + settings.slot()
                + " LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)"
            : "CREATE_REPLICATION_SLOT " + settings.slot() + " LOGICAL pgoutput EXPORT_SNAPSHOT";
    // Recorded first: a crash right after the slot's creation then finds a pending snapshot and
    // starts over, instead of a slot nobody remembers.
    SlotIncarnation incarnation =
        new SlotIncarnation(UUID.randomUUID(), server.systemIdentifier(), server.timeline());
    record(incarnation, "pending");
    ExportedSnapshot exported;
    try (Statement st = session.createStatement();
        ResultSet rs = st.executeQuery(command)) {
      rs.next();
      exported =
          new ExportedSnapshot(
              rs.getString("snapshot_name"), Lsn.parse(rs.getString("consistent_point")));
    }
    log.info(
        "pipeline {}: created slot {} with an exported snapshot, consistent at {} (incarnation {})",
        settings.name(),
        settings.slot(),
        exported.consistentPoint(),
        incarnation.id());
    return new Prepared(incarnation, exported.consistentPoint(), Optional.of(exported));
  }

  /** The slot stayed active for another connection through every attempt to drop it. */
  public static final class SlotActiveException extends Exception {
    private final String slot;

    public SlotActiveException(String slot) {
      super("slot " + slot + " is active for another connection");
      this.slot = slot;
    }

    public String slot() {
      return slot;
    }
  }

  /**
   * Drops the pipeline's logical slot on the source: the configured one and, when Weir's record
   * names another, that one too. A slot that does not exist is skipped. While PostgreSQL reports a
   * slot active (SQLState 55006: a walsender of a connection that is going away) it retries up to
   * {@code attempts} times {@code pause} apart. Blocking. Weir's records are not touched: call
   * {@link #forgetRecords} once this returned.
   *
   * @return the slots dropped (empty: none existed)
   */
  public List<String> dropSlots(Connection source, int attempts, Duration pause)
      throws SQLException, SlotActiveException, InterruptedException {
    List<String> names = new ArrayList<>();
    names.add(settings.slot());
    Optional<Recorded> record = recorded();
    if (record.isPresent() && !record.get().slotName().equals(settings.slot())) {
      names.add(record.get().slotName());
    }
    List<String> dropped = new ArrayList<>();
    for (String name : names) {
      for (int attempt = 1; ; attempt++) {
        if (slot(source, name).isEmpty()) {
          break;
        }
        try (PreparedStatement ps = source.prepareStatement("SELECT pg_drop_replication_slot(?)")) {
          ps.setString(1, name);
          ps.execute();
          dropped.add(name);
          break;
        } catch (SQLException e) {
          String state = e.getSQLState();
          if ("42704".equals(state)) {
            break; // gone meanwhile
          }
          if (!"55006".equals(state)) {
            throw e;
          }
          if (attempt >= attempts) {
            throw new SlotActiveException(name);
          }
          Thread.sleep(pause.toMillis());
        }
      }
    }
    return dropped;
  }

  /**
   * Deletes everything Weir keeps for this pipeline in its own schema, in one transaction: the slot
   * record ({@code cdc_slot}), the library checkpoint and snapshot progress ({@code
   * cdc_checkpoint}) and the accepted table shapes ({@code cdc_relation}). Afterwards the next
   * start is a first start. Only after the slot is gone ({@link #dropSlots}).
   */
  public void forgetRecords() throws SQLException {
    try (Connection c = stateStore.getConnection()) {
      boolean autoCommit = c.getAutoCommit();
      c.setAutoCommit(false);
      try {
        for (String table : List.of("cdc_slot", "cdc_checkpoint", "cdc_relation")) {
          try (PreparedStatement ps =
              c.prepareStatement(
                  "DELETE FROM " + stateSchema + "." + table + " WHERE pipeline = ?")) {
            ps.setString(1, settings.name());
            ps.executeUpdate();
          }
        }
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      } finally {
        c.setAutoCommit(autoCommit);
      }
    }
  }

  private void dropSlot(Connection source) throws SQLException {
    try (PreparedStatement ps = source.prepareStatement("SELECT pg_drop_replication_slot(?)")) {
      ps.setString(1, settings.slot());
      ps.execute();
    }
  }

  /** Records the initial snapshot's state ({@code done} once the hand-off checkpoint is stored). */
  public void markSnapshot(String state) throws SQLException {
    try (Connection c = stateStore.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "UPDATE " + stateSchema + ".cdc_slot SET snapshot_state = ? WHERE pipeline = ?")) {
      ps.setString(1, state);
      ps.setString(2, settings.name());
      ps.executeUpdate();
    }
  }

  private void record(SlotIncarnation incarnation) throws SQLException {
    record(incarnation, null);
  }

  private void record(SlotIncarnation incarnation, String snapshotState) throws SQLException {
    try (Connection c = stateStore.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "INSERT INTO "
                    + stateSchema
                    + ".cdc_slot (pipeline, slot_name, incarnation, system_identifier, timeline, "
                    + "snapshot_state) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (pipeline) DO UPDATE SET slot_name = excluded.slot_name, "
                    + "incarnation = excluded.incarnation, system_identifier = excluded.system_identifier, "
                    + "timeline = excluded.timeline, snapshot_state = excluded.snapshot_state, created_at = now()")) {
      ps.setString(1, settings.name());
      ps.setString(2, settings.slot());
      ps.setObject(3, incarnation.id());
      ps.setBigDecimal(4, new BigDecimal(Long.toUnsignedString(incarnation.systemIdentifier())));
      ps.setInt(5, incarnation.timeline());
      ps.setString(6, snapshotState);
      ps.executeUpdate();
    }
  }
}
