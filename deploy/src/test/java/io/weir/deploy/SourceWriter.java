package io.weir.deploy;

import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.Queue;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.LongFunction;

/**
 * The crash tests' source workload on {@code public.src (id bigint primary key, v bigint, note
 * text)}: transactions of a few inserts of new ids, an update of a random earlier row ({@code v = v
 * + 1}) and now and then a delete, each committed on its own, its xid recorded in commit order (a
 * single writer, so the queue's order is commit order).
 *
 * @param maxInserts inserts per transaction, 1 to this many
 * @param deleteOneIn a transaction also deletes a random row with probability 1/deleteOneIn
 * @param updateNote the note an update writes, or null to leave it
 * @param note the note of an inserted row, by id
 * @param pauseMillis sleep between transactions: the source stays at a pace the sink keeps up with
 */
record SourceWriter(
    int maxInserts,
    int deleteOneIn,
    String updateNote,
    LongFunction<String> note,
    long pauseMillis) {

  /**
   * Commits transactions until {@code keepGoing} says stop; a failure ends the loop and lands in
   * {@code error}.
   */
  void run(
      TestPostgres.TestDatabase db,
      long firstId,
      Random random,
      Queue<Long> committed,
      BooleanSupplier keepGoing,
      AtomicReference<Throwable> error) {
    try (Connection c = db.connect()) {
      c.setAutoCommit(false);
      try (PreparedStatement insert =
              c.prepareStatement("INSERT INTO public.src VALUES (?, ?, ?)");
          PreparedStatement update =
              c.prepareStatement(
                  updateNote == null
                      ? "UPDATE public.src SET v = v + 1 WHERE id = ?"
                      : "UPDATE public.src SET v = v + 1, note = '"
                          + updateNote.replace("'", "''")
                          + "' WHERE id = ?");
          PreparedStatement delete = c.prepareStatement("DELETE FROM public.src WHERE id = ?");
          PreparedStatement xid =
              c.prepareStatement("SELECT pg_current_xact_id()::xid::text::bigint")) {
        long next = firstId;
        while (keepGoing.getAsBoolean()) {
          int inserts = 1 + random.nextInt(maxInserts);
          for (int i = 0; i < inserts; i++) {
            insert.setLong(1, next);
            insert.setLong(2, next);
            insert.setString(3, note.apply(next));
            insert.addBatch();
            next++;
          }
          insert.executeBatch();
          update.setLong(1, 1 + random.nextInt((int) next - 1));
          update.executeUpdate();
          if (random.nextInt(deleteOneIn) == 0) {
            delete.setLong(1, 1 + random.nextInt((int) next - 1));
            delete.executeUpdate();
          }
          long x;
          try (ResultSet rs = xid.executeQuery()) {
            rs.next();
            x = rs.getLong(1);
          }
          c.commit();
          committed.add(x);
          Thread.sleep(pauseMillis);
        }
      }
    } catch (Throwable t) {
      error.set(t);
    }
  }
}
