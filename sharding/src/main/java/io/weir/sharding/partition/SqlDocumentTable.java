package io.weir.sharding.partition;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.Identifiers;
import io.weir.persistence.SafeErrors;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.sql.Statement;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The documents table in PostgreSQL: {@code <schema>.documents} (one row per partition, collection
 * and id: revision, body as the exact text of the after image, the tombstone's row-visibility
 * value, deleted, and the journal sequence of the last change) and {@code
 * <schema>.document_positions} (per partition: applied through which journal sequence, the row
 * rules' fields and the next outbox sequence as of it). Migrations V15 and V16 create them. Every
 * apply locks the partition's position row first, so two writers (a sharding handoff) serialize and
 * the second skips what the first applied. Applies of different partitions share transactions (ADR
 * 0056): they wait in a queue and at most {@link #COMBINING} transactions take what waits. Reads of
 * many rows run in one repeatable-read, read-only transaction with the position, so they see the
 * rows exactly as of it. Runs on the executor given (the documents pool's).
 */
public final class SqlDocumentTable implements DocumentTable {
  private static final Logger log = LoggerFactory.getLogger(SqlDocumentTable.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TypeReference<TreeMap<String, String>> FIELDS = new TypeReference<>() {};

  /** Rows written by one multi-row statement at most. */
  static final int ROWS_PER_STATEMENT = 64;

  /** Partitions' applies sharing one transaction at most. */
  static final int APPLIES_PER_TRANSACTION = 64;

  /** Document changes in one shared transaction at most (a larger single apply goes alone). */
  static final int CHANGES_PER_TRANSACTION = 20_000;

  /** Transactions of shared applies running at once at most. */
  static final int COMBINING = 2;

  /** Rows fetched from the server at a time by a scan. */
  private static final int FETCH = 500;

  private static final String COLUMNS = "collection, id, revision, body, acl, deleted, journal_seq";

  private final DataSource dataSource;
  private final String documents;

  /** The journal every apply's last event is checked in (null: not checked). */
  private final String journal;

  private final String positions;
  private final String receipts;
  private final Executor executor;
  private final Executor receiptReads;

  /** Applies waiting for a transaction. */
  private final ArrayDeque<Request> waiting = new ArrayDeque<>();

  /** Transactions of applies running (guarded by {@link #waiting}). */
  private int combining;

  private final AtomicLong retriedAlone = new AtomicLong();

  /** A table whose applies are not checked against a journal (events made up by tests). */
  public SqlDocumentTable(DataSource dataSource, String schema, Executor executor) {
    this(dataSource, schema, executor, false);
  }

  /**
   * @param journalChecked whether every apply checks, in its transaction, that {@code schema}'s
   *     journal holds the last event it applies (ADR 0060): on for the partitions' table, which
   *     applies only persisted events
   */
  public SqlDocumentTable(
      DataSource dataSource, String schema, Executor executor, boolean journalChecked) {
    this.dataSource = dataSource;
    Identifiers.require("schema name", schema);
    this.journal = journalChecked ? schema + ".event_journal" : null;
    this.documents = schema + ".documents";
    this.positions = schema + ".document_positions";
    this.receipts = schema + ".receipts";
    this.executor = executor;
    // Receipt reads of partitions that start (ADR 0057) go one at a time, beside the applies.
    ThreadPoolExecutor reads =
        new ThreadPoolExecutor(
            0,
            1,
            10,
            TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(),
            r -> {
              Thread t = new Thread(r, "weir-receipt-reads");
              t.setDaemon(true);
              return t;
            });
    this.receiptReads = reads;
  }

  @Override
  public CompletionStage<Position> position(int partition) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection();
              PreparedStatement ps =
                  c.prepareStatement(
                      "SELECT applied_through, rule_fields, outbox_next, writer_epoch FROM "
                          + positions
                          + " WHERE partition_id = ?")) {
            ps.setInt(1, partition);
            try (ResultSet rs = ps.executeQuery()) {
              return rs.next() ? position(rs) : new Position(0, Map.of(), 0);
            }
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        executor);
  }

  private static Position position(ResultSet rs) throws SQLException {
    return new Position(rs.getLong(1), fields(rs.getString(2)), rs.getLong(3), rs.getLong(4));
  }

  @Override
  public CompletionStage<Position> claim(int partition) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection();
              PreparedStatement ps =
                  c.prepareStatement(
                      "INSERT INTO "
                          + positions
                          + " AS p (partition_id, applied_through, rule_fields, outbox_next,"
                          + " writer_epoch) VALUES (?, 0, '{}', 0, 1) ON CONFLICT (partition_id)"
                          + " DO UPDATE SET writer_epoch = p.writer_epoch + 1"
                          + " RETURNING applied_through, rule_fields, outbox_next, writer_epoch")) {
            ps.setInt(1, partition);
            try (ResultSet rs = ps.executeQuery()) {
              rs.next();
              return position(rs);
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
      long receiptsBefore,
      long writerEpoch) {
    Request r =
        new Request(
            partition,
            events,
            ruleFieldsAfter,
            outboxNextAfter,
            expectedThrough,
            receiptsBefore,
            writerEpoch,
            new CompletableFuture<>());
    synchronized (waiting) {
      waiting.addLast(r);
    }
    startCombining();
    return r.done();
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

  /** Creates the partition's position row if missing and locks it: the one writer at a time. */
  static long lockPosition(Connection c, String positions, int partition) throws SQLException {
    return lockPositions(c, positions, new Object[] {partition}).get(partition)[0];
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
    move(c, positions, List.of(new Moved(partition, through, text(fields), outboxNext)));
  }

  /** One partition's apply, waiting for a transaction it shares with other partitions' applies. */
  private record Request(
      int partition,
      List<Applying> events,
      Map<String, String> ruleFieldsAfter,
      long outboxNextAfter,
      long expectedThrough,
      long receiptsBefore,
      long writerEpoch,
      CompletableFuture<Long> done) {
    int changes() {
      int n = 0;
      for (Applying e : events) {
        n += e.changes().size();
      }
      return n;
    }
  }

  /** A document's row to write in a partition. */
  record Placed(int partition, Put put) {}

  /** A receipt a partition keeps. */
  private record KeptIn(int partition, Applying.Kept kept) {}

  /** A partition's new position. */
  private record Moved(int partition, long through, String ruleFields, long outboxNext) {}

  /** Starts a combiner when applies wait and fewer than {@link #COMBINING} run. */
  private void startCombining() {
    synchronized (waiting) {
      if (waiting.isEmpty() || combining >= COMBINING) {
        return;
      }
      combining++;
    }
    try {
      executor.execute(this::combine);
    } catch (RuntimeException e) {
      // The executor is shut down: what no running combiner will take fails now.
      List<Request> stranded = new ArrayList<>();
      synchronized (waiting) {
        combining--;
        if (combining == 0) {
          stranded.addAll(waiting);
          waiting.clear();
        }
      }
      stranded.forEach(r -> r.done().completeExceptionally(e));
    }
  }

  /**
   * Runs the waiting applies, several partitions' in one transaction (ADR 0056), until none wait;
   * at most {@link #COMBINING} of these run at a time, each taking what waits when it starts.
   */
  private void combine() {
    boolean exited = false;
    try {
      while (true) {
        List<Request> batch;
        synchronized (waiting) {
          batch = take();
          if (batch.isEmpty()) {
            combining--;
            exited = true;
            return;
          }
        }
        try {
          run(batch);
        } catch (RuntimeException | Error e) {
          batch.forEach(r -> r.done().completeExceptionally(e));
          if (e instanceof Error) {
            throw e;
          }
        }
      }
    } finally {
      if (!exited) {
        synchronized (waiting) {
          combining--;
        }
        startCombining();
      }
    }
  }

  /**
   * The waiting applies for one transaction, in the order they came: at most one per partition (a
   * later one of the same partition waits for the next), within {@link #APPLIES_PER_TRANSACTION}
   * and {@link #CHANGES_PER_TRANSACTION} (the first is always taken).
   */
  private List<Request> take() {
    List<Request> batch = new ArrayList<>();
    Set<Integer> partitions = new HashSet<>();
    int changes = 0;
    Iterator<Request> it = waiting.iterator();
    while (it.hasNext() && batch.size() < APPLIES_PER_TRANSACTION) {
      Request r = it.next();
      int n = r.changes();
      if (!batch.isEmpty() && changes + n > CHANGES_PER_TRANSACTION) {
        break;
      }
      if (partitions.add(r.partition())) {
        it.remove();
        batch.add(r);
        changes += n;
      }
    }
    return batch;
  }

  /**
   * Applies {@code batch} in one transaction and answers each. When the transaction fails with more
   * than one apply in it, each is run again in a transaction of its own, so that one partition's
   * failing rows fail only that partition; once the connection is lost the rest fail at once.
   *
   * @return the failure when the connection was lost, else null
   */
  private Exception run(List<Request> batch) {
    Object[] outcomes;
    try (Connection c = dataSource.getConnection()) {
      c.setAutoCommit(false);
      try {
        outcomes = applyTogether(c, batch);
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      }
    } catch (SQLException | RuntimeException e) {
      if (batch.size() == 1 || connectionLost(e)) {
        batch.forEach(r -> r.done().completeExceptionally(new CompletionException(e)));
        return connectionLost(e) ? e : null;
      }
      retriedAlone.incrementAndGet();
      log.warn(
          "documents table: a transaction of {} partitions' applies failed ({}); applying each"
              + " alone",
          batch.size(),
          SafeErrors.describe(e));
      for (int i = 0; i < batch.size(); i++) {
        Exception lost = run(List.of(batch.get(i)));
        if (lost != null) {
          for (Request r : batch.subList(i + 1, batch.size())) {
            r.done().completeExceptionally(new CompletionException(lost));
          }
          return lost;
        }
      }
      return null;
    }
    for (int i = 0; i < batch.size(); i++) {
      if (outcomes[i] instanceof RuntimeException failure) {
        batch.get(i).done().completeExceptionally(failure);
      } else {
        batch.get(i).done().complete((Long) outcomes[i]);
      }
    }
    return null;
  }

  /** Shared transactions that failed and had their applies tried one by one (for tests). */
  long retriedAlone() {
    return retriedAlone.get();
  }

  private static boolean connectionLost(Exception e) {
    return e instanceof SQLTransientConnectionException
        || e instanceof SQLException s
            && s.getSQLState() != null
            && s.getSQLState().startsWith("08");
  }

  /**
   * The applies of {@code batch} (one per partition): locks their positions in that order, then
   * each apply's outcome: its new position, the position when it has nothing to apply, or a {@link
   * TableGap} (that apply writes nothing; the others do).
   */
  private Object[] applyTogether(Connection c, List<Request> batch) throws SQLException {
    // The events are durable in the journal already, so this commit need not wait for its own
    // flush: a crash that loses it rewinds the positions with the rows (one transaction), and the
    // next apply finds the gap and replays it from the journal (TableGap). The journal is pruned
    // only through a position read back from memory after this commit returned, by a synchronous
    // commit whose flush covers this one's WAL (ADR 0035).
    try (Statement st = c.createStatement()) {
      st.execute("SET LOCAL synchronous_commit TO off");
    }
    Map<Integer, long[]> positionsNow =
        lockPositions(c, positions, batch.stream().map(Request::partition).toArray());
    Object[] outcomes = new Object[batch.size()];
    Set<Integer> unjournaled = unjournaled(c, batch, positionsNow);
    List<Placed> rows = new ArrayList<>();
    List<KeptIn> kept = new ArrayList<>();
    List<Moved> moved = new ArrayList<>();
    for (int i = 0; i < batch.size(); i++) {
      Request r = batch.get(i);
      long[] now = positionsNow.get(r.partition());
      long applied = now[0];
      if (r.writerEpoch() != UNFENCED && r.writerEpoch() != now[1]) {
        outcomes[i] = new Fenced("a newer writer claimed the partition's rows");
        continue;
      }
      if (unjournaled.contains(r.partition())) {
        outcomes[i] = new Fenced("the journal on this storage lacks the events to apply");
        continue;
      }
      if (r.events().isEmpty()) {
        expireReceipts(c, r);
        if (applied == r.expectedThrough()) {
          try (PreparedStatement ps =
              c.prepareStatement(
                  "UPDATE " + positions + " SET outbox_next = ? WHERE partition_id = ?")) {
            ps.setLong(1, r.outboxNextAfter());
            ps.setInt(2, r.partition());
            ps.executeUpdate();
          }
        }
        outcomes[i] = applied;
        continue;
      }
      long last = r.events().get(r.events().size() - 1).sequence();
      if (applied < r.events().get(0).sequence() - 1) {
        outcomes[i] = new TableGap(applied);
        continue;
      }
      expireReceipts(c, r);
      if (applied >= last) {
        outcomes[i] = applied;
        continue;
      }
      // Puts between two other changes are written together, the last per document winning.
      LinkedHashMap<String, Put> puts = new LinkedHashMap<>();
      for (Applying e : r.events()) {
        if (e.sequence() <= applied) {
          continue;
        }
        for (DocumentChange change : e.changes()) {
          if (change instanceof DocumentChange.Put p) {
            puts.put(p.key(), new Put(p.document(), e.sequence()));
          } else {
            place(r.partition(), puts, rows);
            upsert(c, documents, rows);
            clear(c, r.partition(), change);
          }
        }
      }
      place(r.partition(), puts, rows);
      kept.addAll(kept(r, applied));
      moved.add(new Moved(r.partition(), last, text(r.ruleFieldsAfter()), r.outboxNextAfter()));
      outcomes[i] = last;
    }
    upsert(c, documents, rows);
    keep(c, kept);
    move(c, positions, moved);
    return outcomes;
  }

  /**
   * The partitions of {@code batch} whose apply would write events the journal does not hold (its
   * last event is missing): the storage changed under their writer, which must not move the table
   * past the journal (ADR 0060). Empty when the journal is not checked. The events after a
   * partition's position are never pruned, so the last one is there for a writer on its storage.
   */
  private Set<Integer> unjournaled(Connection c, List<Request> batch, Map<Integer, long[]> now)
      throws SQLException {
    if (journal == null) {
      return Set.of();
    }
    List<String> ids = new ArrayList<>();
    List<Long> sequences = new ArrayList<>();
    Map<String, Integer> partitionOf = new HashMap<>();
    for (Request r : batch) {
      if (r.events().isEmpty()) {
        continue;
      }
      long last = r.events().get(r.events().size() - 1).sequence();
      if (now.get(r.partition())[0] >= last) {
        continue;
      }
      String id = Partition.persistenceId(r.partition()).id();
      ids.add(id);
      sequences.add(last);
      partitionOf.put(id, r.partition());
    }
    if (ids.isEmpty()) {
      return Set.of();
    }
    Set<Integer> missing = new HashSet<>(partitionOf.values());
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT j.persistence_id FROM "
                + journal
                + " j JOIN unnest(?::text[], ?::bigint[]) AS w(id, seq)"
                + " ON j.persistence_id = w.id AND j.sequence_number = w.seq")) {
      ps.setArray(1, c.createArrayOf("text", ids.toArray()));
      ps.setArray(2, c.createArrayOf("bigint", sequences.toArray()));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          missing.remove(partitionOf.get(rs.getString(1)));
        }
      }
    }
    return missing;
  }

  /**
   * Creates the missing position rows of the partitions {@code ids} and locks them all, in
   * partition order (so that two transactions never wait for each other's positions in a cycle).
   *
   * @return per partition its applied-through sequence and writer epoch
   */
  private static Map<Integer, long[]> lockPositions(Connection c, String positions, Object[] ids)
      throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "INSERT INTO "
                + positions
                + " (partition_id, applied_through, rule_fields, outbox_next)"
                + " SELECT p, 0, '{}', 0 FROM unnest(?::integer[]) AS p ORDER BY p"
                + " ON CONFLICT (partition_id) DO NOTHING")) {
      ps.setArray(1, c.createArrayOf("integer", ids));
      ps.executeUpdate();
    }
    Map<Integer, long[]> out = new HashMap<>();
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT partition_id, applied_through, writer_epoch FROM "
                + positions
                + " WHERE partition_id = ANY (?::integer[]) ORDER BY partition_id FOR UPDATE")) {
      ps.setArray(1, c.createArrayOf("integer", ids));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          out.put(rs.getInt(1), new long[] {rs.getLong(2), rs.getLong(3)});
        }
      }
    }
    if (out.size() != ids.length) {
      throw new IllegalStateException("a partition's position row was not locked");
    }
    return out;
  }

  /** Deletes the receipts the apply says expired (receiptsBefore 0: none). */
  private void expireReceipts(Connection c, Request r) throws SQLException {
    if (r.receiptsBefore() <= 0) {
      return;
    }
    try (PreparedStatement ps =
        c.prepareStatement(
            "DELETE FROM " + receipts + " WHERE partition_id = ? AND at_millis < ?")) {
      ps.setInt(1, r.partition());
      ps.setLong(2, r.receiptsBefore());
      ps.executeUpdate();
    }
  }

  /** A reset deletes the collection's rows; a rule change clears its tombstones' values. */
  private void clear(Connection c, int partition, DocumentChange change) throws SQLException {
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

  private static void place(int partition, LinkedHashMap<String, Put> puts, List<Placed> rows) {
    for (Put p : puts.values()) {
      rows.add(new Placed(partition, p));
    }
    puts.clear();
  }

  /** The receipts the apply's events after {@code applied} keep (a key's latest wins). */
  private static List<KeptIn> kept(Request r, long applied) {
    LinkedHashMap<String, Applying.Kept> kept = new LinkedHashMap<>();
    for (Applying e : r.events()) {
      if (e.sequence() > applied) {
        for (Receipt.Keyed k : e.receipts()) {
          kept.remove(k.key());
          kept.put(k.key(), new Applying.Kept(k, e.sequence()));
        }
      }
    }
    List<KeptIn> out = new ArrayList<>(kept.size());
    kept.values().forEach(k -> out.add(new KeptIn(r.partition(), k)));
    return out;
  }

  /** Writes the receipts (a partition's receipt under a key replaces the one before). */
  private void keep(Connection c, List<KeptIn> kept) throws SQLException {
    writeRows(
        c,
        kept,
        n ->
            "INSERT INTO "
                + receipts
                + " (partition_id, receipt_key, command_id, first_sequence, revisions, at_millis,"
                + " journal_seq) VALUES "
                + values(n, "(?, ?, ?, ?, ?::bigint[], ?, ?)")
                + " ON CONFLICT (partition_id, receipt_key) DO UPDATE SET"
                + " command_id = EXCLUDED.command_id, first_sequence = EXCLUDED.first_sequence,"
                + " revisions = EXCLUDED.revisions, at_millis = EXCLUDED.at_millis,"
                + " journal_seq = EXCLUDED.journal_seq",
        (ps, k, in) -> {
          Receipt r = in.kept().receipt().receipt();
          ps.setInt(k++, in.partition());
          ps.setString(k++, in.kept().receipt().key());
          ps.setString(k++, r.commandId());
          ps.setLong(k++, r.firstSequence());
          ps.setString(k++, arrayLiteral(r.revisions()));
          ps.setLong(k++, r.atMillis());
          ps.setLong(k++, in.kept().sequence());
          return k;
        });
  }

  /** Sets the partitions' positions (their rows are locked). */
  private static void move(Connection c, String positions, List<Moved> moved) throws SQLException {
    writeRows(
        c,
        moved,
        n ->
            "UPDATE "
                + positions
                + " AS p SET applied_through = v.through, rule_fields = v.fields,"
                + " outbox_next = v.next FROM (VALUES "
                + values(n, 4)
                + ") AS v (partition_id, through, fields, next)"
                + " WHERE p.partition_id = v.partition_id",
        (ps, k, m) -> {
          ps.setInt(k++, m.partition());
          ps.setLong(k++, m.through());
          ps.setString(k++, m.ruleFields());
          ps.setLong(k++, m.outboxNext());
          return k;
        });
  }

  /** Binds one row's parameters from index {@code k} on; returns the index after them. */
  private interface RowBinder<T> {
    int bind(PreparedStatement ps, int k, T row) throws SQLException;
  }

  /** Runs {@code sql} (the statement for n rows) over {@code rows}, several rows per statement. */
  private static <T> void writeRows(
      Connection c, List<T> rows, IntFunction<String> sql, RowBinder<T> bind) throws SQLException {
    for (int done = 0; done < rows.size(); ) {
      int n = rowsInStatement(rows.size() - done);
      try (PreparedStatement ps = c.prepareStatement(sql.apply(n))) {
        int k = 1;
        for (T row : rows.subList(done, done + n)) {
          k = bind.bind(ps, k, row);
        }
        ps.executeUpdate();
      }
      done += n;
    }
  }

  /**
   * Rows in the next statement of a multi-row write with {@code remaining} rows left: a power of
   * two up to {@link #ROWS_PER_STATEMENT}, so that few statement texts exist (each is prepared once
   * per connection).
   */
  static int rowsInStatement(int remaining) {
    return Integer.highestOneBit(Math.min(remaining, ROWS_PER_STATEMENT));
  }

  /** {@code (?, ?), (?, ?)} for 2 rows of 2 columns. */
  static String values(int rows, int columns) {
    return values(rows, "(" + "?, ".repeat(columns - 1) + "?)");
  }

  /** {@code row} {@code rows} times, separated by commas. */
  static String values(int rows, String row) {
    StringBuilder b = new StringBuilder(rows * (row.length() + 2));
    for (int r = 0; r < rows; r++) {
      b.append(r == 0 ? "" : ", ").append(row);
    }
    return b.toString();
  }

  /** A PostgreSQL array literal of {@code values}: {@code {1,2}}. */
  static String arrayLiteral(List<Long> values) {
    StringBuilder b = new StringBuilder(values.size() * 8 + 2).append('{');
    for (int i = 0; i < values.size(); i++) {
      b.append(i == 0 ? "" : ",").append(values.get(i).longValue());
    }
    return b.append('}').toString();
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

  @Override
  public CompletionStage<Void> receiptKeys(
      int partition, long sinceMillis, int limit, ReceiptKeyVisitor into) {
    return CompletableFuture.supplyAsync(
        () -> {
          if (!into.wanted()) {
            return null;
          }
          // A cursor (autocommit off, a fetch size): the read may be long, its rows are not kept.
          // A failure closes the connection; the pool rolls it back and resets it.
          try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            try (PreparedStatement ps =
                c.prepareStatement(
                    "SELECT receipt_key, at_millis FROM "
                        + receipts
                        + " WHERE partition_id = ? AND at_millis >= ?"
                        + " ORDER BY at_millis DESC LIMIT ?")) {
              ps.setFetchSize(10_000);
              ps.setInt(1, partition);
              ps.setLong(2, sinceMillis);
              ps.setInt(3, limit);
              try (ResultSet rs = ps.executeQuery()) {
                while (rs.next() && into.receipt(rs.getString(1), rs.getLong(2))) {
                  // handed over
                }
              }
            }
            c.commit();
            c.setAutoCommit(true);
            return null;
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        receiptReads);
  }

  /** Writes (inserts or replaces) the rows of {@code puts} of the partition and empties it. */
  static void flush(Connection c, String documents, int partition, LinkedHashMap<String, Put> puts)
      throws SQLException {
    List<Placed> rows = new ArrayList<>(puts.size());
    place(partition, puts, rows);
    upsert(c, documents, rows);
  }

  /** Writes (inserts or replaces) {@code rows}, several per statement, and empties the list. */
  static void upsert(Connection c, String documents, List<Placed> rows) throws SQLException {
    writeRows(
        c,
        rows,
        n ->
            "INSERT INTO "
                + documents
                + " (partition_id, collection, id, revision, body, acl, deleted, journal_seq)"
                + " VALUES "
                + values(n, 8)
                + " ON CONFLICT (partition_id, collection, id) DO UPDATE SET"
                + " revision = EXCLUDED.revision, body = EXCLUDED.body, acl = EXCLUDED.acl,"
                + " deleted = EXCLUDED.deleted, journal_seq = EXCLUDED.journal_seq",
        (ps, k, p) -> {
          Document d = p.put().document();
          ps.setInt(k++, p.partition());
          ps.setString(k++, d.collection());
          ps.setString(k++, d.id());
          ps.setLong(k++, d.revision());
          ps.setString(k++, d.body());
          ps.setString(k++, d.acl());
          ps.setBoolean(k++, d.deleted());
          ps.setLong(k++, p.put().journalSequence());
          return k;
        });
    rows.clear();
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
    if (fields.isEmpty()) {
      return "{}";
    }
    try {
      return JSON.writeValueAsString(new TreeMap<>(fields));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("rule fields could not be written", null);
    }
  }
}
