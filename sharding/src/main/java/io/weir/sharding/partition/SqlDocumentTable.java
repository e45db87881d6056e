package io.weir.sharding.partition;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.Identifiers;
import io.weir.sharding.partition.PartitionProtocol.Document;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import javax.sql.DataSource;

/**
 * The documents table in PostgreSQL: {@code <schema>.documents} (one row per partition, collection
 * and id: revision, body as the exact text of the after image, the tombstone's row-visibility
 * value, deleted, and the journal sequence of the last change) and {@code
 * <schema>.document_positions} (per partition: applied through which journal sequence, and the row
 * rules' fields as of it). Migration V15 creates both. Every apply locks the partition's position
 * row first, so two writers (a sharding handoff) serialize and the second skips what the first
 * applied. Runs on the blocking-I/O executor.
 */
public final class SqlDocumentTable implements DocumentTable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TypeReference<TreeMap<String, String>> FIELDS = new TypeReference<>() {};

  /** Rows written by one batched statement at most. */
  private static final int BATCH = 500;

  private final DataSource dataSource;
  private final String documents;
  private final String positions;
  private final Executor blockingIo;

  public SqlDocumentTable(DataSource dataSource, String schema, Executor blockingIo) {
    this.dataSource = dataSource;
    Identifiers.require("schema name", schema);
    this.documents = schema + ".documents";
    this.positions = schema + ".document_positions";
    this.blockingIo = blockingIo;
  }

  @Override
  public CompletionStage<Position> position(int partition) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection();
              PreparedStatement ps =
                  c.prepareStatement(
                      "SELECT applied_through, rule_fields FROM "
                          + positions
                          + " WHERE partition_id = ?")) {
            ps.setInt(1, partition);
            try (ResultSet rs = ps.executeQuery()) {
              return rs.next()
                  ? new Position(rs.getLong(1), fields(rs.getString(2)))
                  : new Position(0, Map.of());
            }
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        blockingIo);
  }

  @Override
  public CompletionStage<Long> apply(
      int partition, List<Applying> events, Map<String, String> ruleFieldsAfter) {
    return inTransaction(c -> apply(c, partition, events, ruleFieldsAfter));
  }

  @Override
  public CompletionStage<Long> seed(
      int partition,
      long expected,
      long through,
      List<Document> documents,
      Map<String, String> ruleFields) {
    return inTransaction(
        c -> {
          long applied = lockPosition(c, partition);
          if (applied != expected) {
            return applied;
          }
          try (PreparedStatement ps =
              c.prepareStatement("DELETE FROM " + this.documents + " WHERE partition_id = ?")) {
            ps.setInt(1, partition);
            ps.executeUpdate();
          }
          LinkedHashMap<String, Row> puts = new LinkedHashMap<>();
          for (Document d : documents) {
            puts.put(Partition.key(d.collection(), d.id()), new Row(d, through));
            if (puts.size() >= BATCH) {
              flush(c, partition, puts);
            }
          }
          flush(c, partition, puts);
          setPosition(c, partition, through, ruleFields);
          return through;
        });
  }

  /** A document's row to write and the journal sequence of its change. */
  private record Row(Document document, long journalSequence) {}

  private interface Work {
    long run(Connection c) throws SQLException;
  }

  private CompletionStage<Long> inTransaction(Work work) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            try {
              long result = work.run(c);
              c.commit();
              return result;
            } catch (SQLException | RuntimeException e) {
              c.rollback();
              throw e;
            }
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        blockingIo);
  }

  /** Creates the partition's position row if missing and locks it: the one writer at a time. */
  private long lockPosition(Connection c, int partition) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "INSERT INTO "
                + positions
                + " (partition_id, applied_through, rule_fields) VALUES (?, 0, '{}')"
                + " ON CONFLICT (partition_id) DO NOTHING")) {
      ps.setInt(1, partition);
      ps.executeUpdate();
    }
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT applied_through FROM " + positions + " WHERE partition_id = ? FOR UPDATE")) {
      ps.setInt(1, partition);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  private void setPosition(Connection c, int partition, long through, Map<String, String> fields)
      throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "UPDATE "
                + positions
                + " SET applied_through = ?, rule_fields = ? WHERE partition_id = ?")) {
      ps.setLong(1, through);
      ps.setString(2, text(fields));
      ps.setInt(3, partition);
      ps.executeUpdate();
    }
  }

  private long apply(
      Connection c, int partition, List<Applying> events, Map<String, String> ruleFieldsAfter)
      throws SQLException {
    long applied = lockPosition(c, partition);
    if (events.isEmpty()) {
      return applied;
    }
    long last = events.get(events.size() - 1).sequence();
    if (applied >= last) {
      return applied;
    }
    if (applied < events.get(0).sequence() - 1) {
      throw new TableGap(applied);
    }
    // Puts between two other changes are written together, the last per document winning.
    LinkedHashMap<String, Row> puts = new LinkedHashMap<>();
    for (Applying e : events) {
      if (e.sequence() <= applied) {
        continue;
      }
      for (DocumentChange change : e.changes()) {
        if (change instanceof DocumentChange.Put p) {
          Document d = p.document();
          puts.put(Partition.key(d.collection(), d.id()), new Row(d, e.sequence()));
        } else {
          flush(c, partition, puts);
          String collection =
              change instanceof DocumentChange.Reset r
                  ? r.collection()
                  : ((DocumentChange.ClearTombstoneAcls) change).collection();
          String sql =
              change instanceof DocumentChange.Reset
                  ? "DELETE FROM " + documents + " WHERE partition_id = ? AND collection = ?"
                  : "UPDATE "
                      + documents
                      + " SET acl = NULL WHERE partition_id = ? AND collection = ?"
                      + " AND deleted AND acl IS NOT NULL";
          try (PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setInt(1, partition);
            ps.setString(2, collection);
            ps.executeUpdate();
          }
        }
      }
    }
    flush(c, partition, puts);
    setPosition(c, partition, last, ruleFieldsAfter);
    return last;
  }

  private void flush(Connection c, int partition, LinkedHashMap<String, Row> puts)
      throws SQLException {
    if (puts.isEmpty()) {
      return;
    }
    try (PreparedStatement ps =
        c.prepareStatement(
            "INSERT INTO "
                + documents
                + " (partition_id, collection, id, revision, body, acl, deleted, journal_seq)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                + " ON CONFLICT (partition_id, collection, id) DO UPDATE SET"
                + " revision = EXCLUDED.revision, body = EXCLUDED.body, acl = EXCLUDED.acl,"
                + " deleted = EXCLUDED.deleted, journal_seq = EXCLUDED.journal_seq")) {
      int n = 0;
      for (Row put : puts.values()) {
        Document d = put.document();
        ps.setInt(1, partition);
        ps.setString(2, d.collection());
        ps.setString(3, d.id());
        ps.setLong(4, d.revision());
        ps.setString(5, d.body());
        ps.setString(6, d.acl());
        ps.setBoolean(7, d.deleted());
        ps.setLong(8, put.journalSequence());
        ps.addBatch();
        if (++n % BATCH == 0) {
          ps.executeBatch();
        }
      }
      if (n % BATCH != 0) {
        ps.executeBatch();
      }
    }
    puts.clear();
  }

  private static Map<String, String> fields(String text) {
    try {
      return text == null || text.isEmpty() ? Map.of() : JSON.readValue(text, FIELDS);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("the documents table's rule fields are not readable", null);
    }
  }

  private static String text(Map<String, String> fields) {
    try {
      return JSON.writeValueAsString(new TreeMap<>(fields));
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("rule fields could not be written", null);
    }
  }
}
