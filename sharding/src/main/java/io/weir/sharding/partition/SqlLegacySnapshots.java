package io.weir.sharding.partition;

import io.weir.persistence.Identifiers;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import javax.sql.DataSource;
import org.postgresql.PGStatement;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Moves the documents of snapshots written before ADR 0032 into the documents table (see {@link
 * LegacySnapshots}). The old snapshot is decoded as a stream, never materialised: its documents go
 * to the table in transactions of {@value #BATCH}, each recording how many are done, so a move cut
 * short by a crash resumes after them. The last transaction writes the index-only snapshot in the
 * old one's place (same sequence number), deletes older snapshots, sets the table's position to the
 * snapshot's sequence number (the journal's later events are applied from there as usual) and
 * forgets the progress. A release before ADR 0032 cannot read the new snapshot, so it never
 * recovers a partition whose bodies left its snapshot.
 *
 * <p>Moves run on {@code moves}, whose threads bound how many run at once on a node (each holds its
 * old snapshot's bytes while it runs); the check whether a partition needs one runs on {@code
 * checks}.
 */
public final class SqlLegacySnapshots implements LegacySnapshots {
  private static final Logger log = LoggerFactory.getLogger(SqlLegacySnapshots.class);

  /** The Jackson serializer's id and the old state's manifest. */
  static final int LEGACY_SERIALIZER = 33;

  static final String LEGACY_MANIFEST = Partition.State.class.getName();

  /** Documents written to the table per transaction. */
  static final int BATCH = 500;

  private final DataSource dataSource;
  private final String snapshots;
  private final String documents;
  private final String positions;
  private final String upgrades;
  private final Executor checks;
  private final Executor moves;

  public SqlLegacySnapshots(DataSource dataSource, String schema, Executor checks, Executor moves) {
    Identifiers.require("schema name", schema);
    this.dataSource = dataSource;
    this.snapshots = schema + ".snapshot";
    this.documents = schema + ".documents";
    this.positions = schema + ".document_positions";
    this.upgrades = schema + ".snapshot_upgrades";
    this.checks = checks;
    this.moves = moves;
  }

  /** The latest snapshot's sequence number, serializer and manifest. */
  private record Latest(long sequence, int serializer, String manifest) {}

  @Override
  public CompletionStage<Boolean> upgrade(int partition, Progress progress) {
    String pid = Partition.persistenceId(partition).id();
    return CompletableFuture.supplyAsync(() -> latest(pid), checks)
        .thenCompose(
            latest -> {
              if (latest == null || latest.serializer() == PartitionSnapshotSerializer.IDENTIFIER) {
                return CompletableFuture.completedFuture(false);
              }
              if (latest.serializer() != LEGACY_SERIALIZER
                  || !LEGACY_MANIFEST.equals(latest.manifest())) {
                throw new IllegalStateException(
                    "partition "
                        + partition
                        + "'s latest snapshot has serializer "
                        + latest.serializer()
                        + ", which this version does not read");
              }
              return CompletableFuture.supplyAsync(
                  () -> {
                    move(partition, pid, latest.sequence(), progress);
                    return true;
                  },
                  moves);
            });
  }

  private Latest latest(String pid) {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT sequence_number, snapshot_ser_id, snapshot_ser_manifest FROM "
                    + snapshots
                    + " WHERE persistence_id = ? ORDER BY sequence_number DESC LIMIT 1")) {
      ps.setString(1, pid);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? new Latest(rs.getLong(1), rs.getInt(2), rs.getString(3)) : null;
      }
    } catch (SQLException e) {
      throw new CompletionException(e);
    }
  }

  private void move(int partition, String pid, long sequence, Progress progress) {
    long started = System.nanoTime();
    try {
      long done = progress(partition, sequence);
      byte[] payload = payload(pid, sequence);
      log.info(
          "partition {}: moving the documents of its snapshot at journal sequence {} ({} bytes,"
              + " written before the documents table held them) into the documents table{}",
          partition,
          sequence,
          payload.length,
          done > 0 ? ", resuming after " + done + " documents" : "");
      long[] written = {done};
      long[] total = {-1};
      PartitionState state =
          LegacySnapshotDecoder.decode(
              payload,
              sequence,
              done,
              BATCH,
              (batch, expected) -> {
                total[0] = expected;
                store(partition, sequence, batch, written, expected);
                progress.moved(written[0], expected);
              });
      payload = null; // the bytes may go before the last transaction
      store(partition, sequence, new ArrayList<>(), written, total[0]); // no documents at all
      finish(partition, pid, sequence, state, written[0]);
      progress.moved(state.index.size(), state.index.size());
      log.info(
          "partition {}: {} documents moved into the documents table in {} ms; its snapshot holds"
              + " their index only now",
          partition,
          state.index.size(),
          (System.nanoTime() - started) / 1_000_000);
    } catch (SQLException | IOException e) {
      throw new CompletionException(e);
    }
  }

  /** Documents already moved from the snapshot at {@code sequence} (0: none, or another one). */
  private long progress(int partition, long sequence) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT snapshot_seq, documents_done FROM "
                    + upgrades
                    + " WHERE partition_id = ?")) {
      ps.setInt(1, partition);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() && rs.getLong(1) == sequence ? rs.getLong(2) : 0;
      }
    }
  }

  private byte[] payload(String pid, long sequence) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT snapshot_payload FROM "
                    + snapshots
                    + " WHERE persistence_id = ? AND sequence_number = ?")) {
      // Binary transfer: the bytes as they are, not twice their size in hex first.
      ps.unwrap(PGStatement.class).setPrepareThreshold(-1);
      ps.setString(1, pid);
      ps.setLong(2, sequence);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          throw new IllegalStateException("the snapshot to move went away");
        }
        return rs.getBytes(1);
      }
    }
  }

  /**
   * Writes a batch of documents (the first batch of a move starting afresh empties the partition's
   * rows first) and how many are done, in one transaction under the position lock.
   */
  private void store(int partition, long sequence, List<Document> batch, long[] written, long total)
      throws SQLException {
    if (batch.isEmpty() && written[0] > 0) {
      return;
    }
    try (Connection c = dataSource.getConnection()) {
      c.setAutoCommit(false);
      try {
        SqlDocumentTable.lockPosition(c, positions, partition);
        if (written[0] == 0) {
          try (PreparedStatement ps =
              c.prepareStatement("DELETE FROM " + documents + " WHERE partition_id = ?")) {
            ps.setInt(1, partition);
            ps.executeUpdate();
          }
        } else if (progress(c, partition) != written[0]) {
          throw new IllegalStateException(
              "another node moved this partition's documents meanwhile");
        }
        SqlDocumentTable.flush(c, documents, partition, SqlDocumentTable.puts(batch, sequence));
        long done = written[0] + batch.size();
        try (PreparedStatement ps =
            c.prepareStatement(
                "INSERT INTO "
                    + upgrades
                    + " (partition_id, snapshot_seq, documents_done, documents_total)"
                    + " VALUES (?, ?, ?, ?) ON CONFLICT (partition_id) DO UPDATE SET"
                    + " snapshot_seq = EXCLUDED.snapshot_seq,"
                    + " documents_done = EXCLUDED.documents_done,"
                    + " documents_total = EXCLUDED.documents_total")) {
          ps.setInt(1, partition);
          ps.setLong(2, sequence);
          ps.setLong(3, done);
          ps.setLong(4, total);
          ps.executeUpdate();
        }
        c.commit();
        written[0] = done;
        batch.clear();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      }
    }
  }

  private long progress(Connection c, int partition) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement("SELECT documents_done FROM " + upgrades + " WHERE partition_id = ?")) {
      ps.setInt(1, partition);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getLong(1) : -1;
      }
    }
  }

  /**
   * Replaces the old snapshot with the index-only one, drops older snapshots, sets the table's
   * position to the snapshot and forgets the progress: one transaction.
   */
  private void finish(int partition, String pid, long sequence, PartitionState state, long written)
      throws SQLException {
    byte[] snapshot = PartitionSnapshotSerializer.write(state);
    try (Connection c = dataSource.getConnection()) {
      c.setAutoCommit(false);
      try {
        SqlDocumentTable.lockPosition(c, positions, partition);
        if (progress(c, partition) != written) {
          throw new IllegalStateException(
              "another node moved this partition's documents meanwhile");
        }
        try (PreparedStatement ps =
            c.prepareStatement(
                "UPDATE "
                    + snapshots
                    + " SET snapshot_ser_id = ?, snapshot_ser_manifest = ?, snapshot_payload = ?"
                    + " WHERE persistence_id = ? AND sequence_number = ? AND snapshot_ser_id = ?")) {
          ps.setInt(1, PartitionSnapshotSerializer.IDENTIFIER);
          ps.setString(2, PartitionSnapshotSerializer.MANIFEST);
          ps.setBytes(3, snapshot);
          ps.setString(4, pid);
          ps.setLong(5, sequence);
          ps.setInt(6, LEGACY_SERIALIZER);
          if (ps.executeUpdate() != 1) {
            throw new IllegalStateException("the snapshot to replace went away");
          }
        }
        try (PreparedStatement ps =
            c.prepareStatement(
                "DELETE FROM " + snapshots + " WHERE persistence_id = ? AND sequence_number < ?")) {
          ps.setString(1, pid);
          ps.setLong(2, sequence);
          ps.executeUpdate();
        }
        SqlDocumentTable.setPosition(
            c, positions, partition, sequence, state.ruleFields(), state.nextSequence);
        try (PreparedStatement ps =
            c.prepareStatement("DELETE FROM " + upgrades + " WHERE partition_id = ?")) {
          ps.setInt(1, partition);
          ps.executeUpdate();
        }
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      }
    }
  }
}
