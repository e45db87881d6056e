package io.weir.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.Partition;
import java.sql.Connection;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.EventEnvelope;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.stream.javadsl.Sink;

/**
 * Audit of a partition sink fed by {@link SourceWriter}: reads every partition's journal (the
 * outbox) and compares it with {@code public.src}, per row: one entry per committed change (its
 * insert, one per update — each adds 1 to {@code v}, so their number is known — and its delete),
 * revisions 1..n in order, and the document the entries end in equals the source row.
 */
final class OutboxAudit {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * @param entries outbox entries read
   * @param loss committed changes missing from the outbox
   * @param dup changes in the outbox more than once
   * @param documentDiff rows whose last entry does not equal the source
   * @param orderErrors outbox sequences or revisions out of order
   * @param byPartition outbox entries per partition
   * @param byId every row's entries in outbox order
   */
  record Outcome(
      long entries,
      long loss,
      long dup,
      long documentDiff,
      long orderErrors,
      long[] byPartition,
      Map<Long, List<Partition.OutboxEntry>> byId) {}

  private OutboxAudit() {}

  /** The source table: id -> row as JSON; deleted rows are absent. */
  static Map<Long, JsonNode> source(TestPostgres.TestDatabase db) throws Exception {
    Map<Long, JsonNode> out = new TreeMap<>();
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement().executeQuery("SELECT id, row_to_json(s)::text FROM public.src s")) {
      while (rs.next()) {
        out.put(rs.getLong(1), JSON.readTree(rs.getString(2)));
      }
    }
    return out;
  }

  /**
   * Reads the outboxes of {@code partitions} partitions for collection {@code src} and compares
   * them with {@code source}.
   */
  static Outcome check(ActorSystem<Void> reader, int partitions, Map<Long, JsonNode> source)
      throws Exception {
    JdbcReadJournal journal =
        PersistenceQuery.get(reader)
            .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier());
    Map<Long, List<Partition.OutboxEntry>> byId = new HashMap<>();
    long[] byPartition = new long[partitions];
    long entries = 0;
    long orderErrors = 0;
    for (int p = 0; p < partitions; p++) {
      List<EventEnvelope> events =
          journal
              .currentEventsByPersistenceId(Partition.persistenceId(p).id(), 0, Long.MAX_VALUE)
              .runWith(Sink.seq(), reader)
              .toCompletableFuture()
              .get();
      long expectedSequence = 1;
      for (EventEnvelope e : events) {
        if (!(e.event() instanceof Partition.Written written)) {
          continue;
        }
        for (Partition.FrameApplied f : written.frames()) {
          for (Partition.OutboxEntry x : f.entries()) {
            if (x.sequence() != expectedSequence++) {
              orderErrors++;
            }
            if (!x.collection().equals("src")) {
              continue;
            }
            byId.computeIfAbsent(Long.parseLong(x.id()), k -> new ArrayList<>()).add(x);
            byPartition[p]++;
            entries++;
          }
        }
      }
    }
    long loss = 0;
    long dup = 0;
    long diff = 0;
    java.util.Set<Long> ids = new java.util.TreeSet<>(byId.keySet());
    ids.addAll(source.keySet());
    for (long id : ids) {
      List<Partition.OutboxEntry> list = byId.getOrDefault(id, List.of());
      JsonNode row = source.get(id);
      if (list.isEmpty()) {
        loss += 1 + (row.get("v").asLong() - id);
        diff++;
        continue;
      }
      for (int i = 0; i < list.size(); i++) {
        if (list.get(i).revision() != i + 1) {
          orderErrors++;
        }
      }
      Partition.OutboxEntry lastEntry = list.get(list.size() - 1);
      long expected;
      if (lastEntry.kind().equals("delete")) {
        long vBefore =
            lastEntry.before() == null ? id : JSON.readTree(lastEntry.before()).get("v").asLong();
        expected = 1 + (vBefore - id) + 1;
        if (row != null) {
          diff++;
        }
      } else {
        JsonNode doc = JSON.readTree(lastEntry.after());
        if (row == null || !doc.equals(row)) {
          diff++;
        }
        expected = 1 + ((row == null ? doc : row).get("v").asLong() - id);
      }
      long actual = list.size();
      if (actual > expected) {
        dup += actual - expected;
      } else {
        loss += expected - actual;
      }
    }
    return new Outcome(entries, loss, dup, diff, orderErrors, byPartition, byId);
  }

  /**
   * Compares the partitions' documents table ({@code weir.documents}, collection {@code src}) with
   * {@code source} and with the outbox: every source row has one live row with an equal body and
   * the revision of its last outbox entry; a row deleted at the source is a tombstone or absent.
   *
   * @return rows that differ
   */
  static long tableDiff(TestPostgres.TestDatabase db, Map<Long, JsonNode> source, Outcome outbox)
      throws Exception {
    record Row(long revision, String body, boolean deleted) {}
    Map<Long, Row> table = new HashMap<>();
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT id, revision, body, deleted FROM weir.documents"
                        + " WHERE collection = 'src'")) {
      while (rs.next()) {
        table.put(
            Long.parseLong(rs.getString(1)),
            new Row(rs.getLong(2), rs.getString(3), rs.getBoolean(4)));
      }
    }
    long diff = 0;
    java.util.Set<Long> ids = new java.util.TreeSet<>(table.keySet());
    ids.addAll(source.keySet());
    for (long id : ids) {
      Row row = table.get(id);
      JsonNode expected = source.get(id);
      List<Partition.OutboxEntry> entries = outbox.byId().getOrDefault(id, List.of());
      long revision = entries.isEmpty() ? -1 : entries.get(entries.size() - 1).revision();
      if (expected == null) {
        if (row != null && !row.deleted()) {
          diff++;
        }
      } else if (row == null
          || row.deleted()
          || row.revision() != revision
          || !JSON.readTree(row.body()).equals(expected)) {
        diff++;
      }
    }
    return diff;
  }
}
