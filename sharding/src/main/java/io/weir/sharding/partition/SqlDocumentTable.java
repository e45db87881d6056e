package io.weir.sharding.partition;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.Identifiers;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
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
 * <schema>.document_positions} (per partition: applied through which journal sequence, the row
 * rules' fields and the next outbox sequence as of it). Migrations V15 and V16 create them. Every
 * apply locks the partition's position row first, so two writers (a sharding handoff) serialize and
 * the second skips what the first applied. Reads of many rows run in one repeatable-read, read-only
 * transaction with the position, so they see the rows exactly as of it. Runs on the executor given
 * (the documents pool's).
 */
public final class SqlDocumentTable implements DocumentTable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TypeReference<TreeMap<String, String>> FIELDS = new TypeReference<>() {};

  /** Rows written by one batched statement at most. */
  private static final int BATCH = 500;

  /** Rows fetched from the server at a time by a scan. */
  private static final int FETCH = 500;

  private static final String COLUMNS = "collection, id, revision, body, acl, deleted, journal_seq";

  private final DataSource dataSource;
  private final String documents;
  private final String positions;
  private final String receipts;
  private final Executor executor;

  public SqlDocumentTable(DataSource dataSource, String schema, Executor executor) {
    this.dataSource = dataSource;
    Identifiers.require("schema name", schema);
    this.documents = schema + ".documents";
    this.positions = schema + ".document_positions";
    this.receipts = schema + ".receipts";
    this.executor = executor;
  }

  @Override
  public CompletionStage<Position> position(int partition) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection();
              PreparedStatement ps =
                  c.prepareStatement(
                      "SELECT applied_through, rule_fields, outbox_next FROM "
                          + positions
                          + " WHERE partition_id = ?")) {
            ps.setInt(1, partition);
            try (ResultSet rs = ps.executeQuery()) {
              return rs.next()
                  ? new Position(rs.getLong(1), fields(rs.getString(2)), rs.getLong(3))
                  : new Position(0, Map.of(), 0);
            }
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        executor);
  }

  @Override
  public CompletionStage<Long> apply(
      int partition,
      List<Applying> events,
      Map<String, String> ruleFieldsAfter,
      long outboxNextAfter,
      long expectedThrough,
      long receiptsBefore) {
    return inTransaction(
        c -> {
          // The events are durable in the journal already, so this commit need not wait for its
          // own flush: a crash that loses it rewinds the position with the rows (one transaction),
          // and the next apply finds the gap and replays it from the journal (TableGap). The
          // journal is pruned only through a position read back from memory after this commit
          // returned, by a synchronous commit whose flush covers this one's WAL (ADR 0035).
          try (Statement st = c.createStatement()) {
            st.execute("SET LOCAL synchronous_commit TO off");
          }
          long applied = lockPosition(c, partition);
          if (receiptsBefore > 0) {
            try (PreparedStatement ps =
                c.prepareStatement(
                    "DELETE FROM " + receipts + " WHERE partition_id = ? AND at_millis < ?")) {
              ps.setInt(1, partition);
              ps.setLong(2, receiptsBefore);
              ps.executeUpdate();
            }
          }
          if (events.isEmpty()) {
            if (applied == expectedThrough) {
              try (PreparedStatement ps =
                  c.prepareStatement(
                      "UPDATE " + positions + " SET outbox_next = ? WHERE partition_id = ?")) {
                ps.setLong(1, outboxNextAfter);
                ps.setInt(2, partition);
                ps.executeUpdate();
              }
            }
            return applied;
          }
          return apply(c, partition, applied, events, ruleFieldsAfter, outboxNextAfter);
        });
  }

  @Override
  public CompletionStage<List<Row>> rows(int partition, List<Key> keys) {
    return CompletableFuture.supplyAsync(
        () -> {
          if (keys.isEmpty()) {
            return List.<Row>of();
          }
          try (Connection c = dataSource.getConnection();
              PreparedStatement ps =
                  c.prepareStatement(
                      "SELECT d.collection, d.id, d.revision, d.body, d.acl, d.deleted,"
                          + " d.journal_seq FROM "
                          + documents
                          + " d JOIN unnest(?::text[], ?::text[]) AS k(c, i)"
                          + " ON d.collection = k.c COLLATE \"C\" AND d.id = k.i COLLATE \"C\""
                          + " WHERE d.partition_id = ?")) {
            String[] collections = new String[keys.size()];
            String[] ids = new String[keys.size()];
            for (int i = 0; i < keys.size(); i++) {
              collections[i] = keys.get(i).collection();
              ids[i] = keys.get(i).id();
            }
            ps.setArray(1, c.createArrayOf("text", collections));
            ps.setArray(2, c.createArrayOf("text", ids));
            ps.setInt(3, partition);
            List<Row> out = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
              while (rs.next()) {
                out.add(row(rs));
              }
            }
            return out;
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        executor);
  }

  @Override
  public CompletionStage<Seen> scan(
      int partition,
      String collection,
      String afterId,
      int limit,
      boolean liveOnly,
      ScanVisitor visit) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            c.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
            c.setReadOnly(true);
            try {
              Seen seen = seen(c, partition);
              visit.seen(seen);
              try (PreparedStatement ps =
                  c.prepareStatement(
                      "SELECT "
                          + COLUMNS
                          + " FROM "
                          + documents
                          + " WHERE partition_id = ? AND collection = ?"
                          + (afterId == null ? "" : " AND id > ?")
                          + (liveOnly ? " AND NOT deleted" : "")
                          + " ORDER BY id"
                          + (limit > 0 ? " LIMIT " + limit : ""))) {
                ps.setFetchSize(FETCH);
                ps.setInt(1, partition);
                ps.setString(2, collection);
                if (afterId != null) {
                  ps.setString(3, afterId);
                }
                try (ResultSet rs = ps.executeQuery()) {
                  while (rs.next()) {
                    if (!visit.row(row(rs))) {
                      break;
                    }
                  }
                }
              }
              c.commit();
              return seen;
            } catch (SQLException | RuntimeException e) {
              c.rollback();
              throw e;
            } finally {
              c.setReadOnly(false);
              c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
            }
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        executor);
  }

  private Seen seen(Connection c, int partition) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT applied_through, outbox_next FROM " + positions + " WHERE partition_id = ?")) {
      ps.setInt(1, partition);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? new Seen(rs.getLong(1), rs.getLong(2)) : new Seen(0, 0);
      }
    }
  }

  private static Row row(ResultSet rs) throws SQLException {
    return new Row(
        new Document(
            rs.getString(1),
            rs.getString(2),
            rs.getLong(3),
            rs.getString(4),
            rs.getBoolean(6),
            rs.getString(5)),
        rs.getLong(7));
  }

  /** A document's row to write and the journal sequence of its change. */
  record Put(Document document, long journalSequence) {}

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
        executor);
  }

  /** Creates the partition's position row if missing and locks it: the one writer at a time. */
  static long lockPosition(Connection c, String positions, int partition) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "INSERT INTO "
                + positions
                + " (partition_id, applied_through, rule_fields, outbox_next) VALUES (?, 0, '{}', 0)"
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

  private long lockPosition(Connection c, int partition) throws SQLException {
    return lockPosition(c, positions, partition);
  }

  /** Sets the partition's position (its row is locked). */
  static void setPosition(
      Connection c,
      String positions,
      int partition,
      long through,
      Map<String, String> fields,
      long outboxNext)
      throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "UPDATE "
                + positions
                + " SET applied_through = ?, rule_fields = ?, outbox_next = ?"
                + " WHERE partition_id = ?")) {
      ps.setLong(1, through);
      ps.setString(2, text(fields));
      ps.setLong(3, outboxNext);
      ps.setInt(4, partition);
      ps.executeUpdate();
    }
  }

  private long apply(
      Connection c,
      int partition,
      long applied,
      List<Applying> events,
      Map<String, String> ruleFieldsAfter,
      long outboxNextAfter)
      throws SQLException {
    long last = events.get(events.size() - 1).sequence();
    if (applied >= last) {
      return applied;
    }
    if (applied < events.get(0).sequence() - 1) {
      throw new TableGap(applied);
    }
    // Puts between two other changes are written together, the last per document winning.
    LinkedHashMap<String, Put> puts = new LinkedHashMap<>();
    for (Applying e : events) {
      if (e.sequence() <= applied) {
        continue;
      }
      for (DocumentChange change : e.changes()) {
        if (change instanceof DocumentChange.Put p) {
          Document d = p.document();
          puts.put(Partition.key(d.collection(), d.id()), new Put(d, e.sequence()));
        } else {
          flush(c, documents, partition, puts);
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
    flush(c, documents, partition, puts);
    storeReceipts(c, partition, applied, events);
    setPosition(c, positions, partition, last, ruleFieldsAfter, outboxNextAfter);
    return last;
  }

  /** Writes the receipts the events after {@code applied} keep (a key's latest wins). */
  private void storeReceipts(Connection c, int partition, long applied, List<Applying> events)
      throws SQLException {
    LinkedHashMap<String, Applying.Kept> kept = new LinkedHashMap<>();
    for (Applying e : events) {
      if (e.sequence() > applied) {
        for (Receipt.Keyed r : e.receipts()) {
          kept.remove(r.key());
          kept.put(r.key(), new Applying.Kept(r, e.sequence()));
        }
      }
    }
    if (kept.isEmpty()) {
      return;
    }
    try (PreparedStatement ps =
        c.prepareStatement(
            "INSERT INTO "
                + receipts
                + " (partition_id, receipt_key, command_id, first_sequence, revisions, at_millis,"
                + " journal_seq) VALUES (?, ?, ?, ?, ?, ?, ?)"
                + " ON CONFLICT (partition_id, receipt_key) DO UPDATE SET"
                + " command_id = EXCLUDED.command_id, first_sequence = EXCLUDED.first_sequence,"
                + " revisions = EXCLUDED.revisions, at_millis = EXCLUDED.at_millis,"
                + " journal_seq = EXCLUDED.journal_seq")) {
      for (Applying.Kept k : kept.values()) {
        Receipt r = k.receipt().receipt();
        ps.setInt(1, partition);
        ps.setString(2, k.receipt().key());
        ps.setString(3, r.commandId());
        ps.setLong(4, r.firstSequence());
        ps.setArray(5, c.createArrayOf("bigint", r.revisions().toArray()));
        ps.setLong(6, r.atMillis());
        ps.setLong(7, k.sequence());
        ps.addBatch();
      }
      ps.executeBatch();
    }
  }

  @Override
  public CompletionStage<List<Receipt.Keyed>> receipts(int partition, List<String> keys) {
    return CompletableFuture.supplyAsync(
        () -> {
          if (keys.isEmpty()) {
            return List.<Receipt.Keyed>of();
          }
          try (Connection c = dataSource.getConnection();
              PreparedStatement ps =
                  c.prepareStatement(
                      "SELECT receipt_key, command_id, first_sequence, revisions, at_millis FROM "
                          + receipts
                          + " WHERE partition_id = ? AND receipt_key = ANY (?)")) {
            ps.setInt(1, partition);
            ps.setArray(2, c.createArrayOf("text", keys.toArray()));
            List<Receipt.Keyed> out = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
              while (rs.next()) {
                List<Long> revisions = new ArrayList<>();
                for (Object v : (Object[]) rs.getArray(4).getArray()) {
                  revisions.add(((Number) v).longValue());
                }
                out.add(
                    new Receipt.Keyed(
                        rs.getString(1),
                        new Receipt(rs.getString(2), rs.getLong(3), revisions, rs.getLong(5))));
              }
            }
            return out;
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        executor);
  }

  /** Writes (inserts or replaces) the rows of {@code puts} and empties it. */
  static void flush(Connection c, String documents, int partition, LinkedHashMap<String, Put> puts)
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
      for (Put put : puts.values()) {
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

  /**
   * Rows of {@code documents} to write with {@link #flush}, each at journal sequence {@code seq}.
   */
  static LinkedHashMap<String, Put> puts(List<Document> documents, long seq) {
    LinkedHashMap<String, Put> out = new LinkedHashMap<>();
    for (Document d : documents) {
      out.put(Partition.key(d.collection(), d.id()), new Put(d, seq));
    }
    return out;
  }

  static Map<String, String> fields(String text) {
    try {
      return text == null || text.isEmpty() ? Map.of() : JSON.readValue(text, FIELDS);
    } catch (IOException e) {
      throw new IllegalStateException("the documents table's rule fields are not readable", null);
    }
  }

  static String text(Map<String, String> fields) {
    try {
      return JSON.writeValueAsString(new TreeMap<>(fields));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("rule fields could not be written", null);
    }
  }
}
