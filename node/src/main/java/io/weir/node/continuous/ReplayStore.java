package io.weir.node.continuous;

import io.weir.persistence.Identifiers;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;

/**
 * The durable replay log of continuous queries ({@code weir.continuous_replay}, migration V14).
 * Appends are sequence-checked: an event at a sequence already stored is accepted only when its
 * bytes are the same (a retried append); anything else there is a {@link Conflict}, so two writers
 * can never interleave one subscription's log.
 */
final class ReplayStore {
  /** One stored event: its sequence, SSE type and JSON data. */
  record Stored(long sequence, String type, String data) {}

  /** Another event is already stored at a sequence being appended. */
  static final class Conflict extends RuntimeException {
    Conflict() {
      super("the replay log holds another event at this sequence", null, false, false);
    }
  }

  private final DataSource dataSource;
  private final String table;

  ReplayStore(DataSource dataSource, String schema) {
    this.dataSource = dataSource;
    this.table = Identifiers.quote(schema) + ".continuous_replay";
  }

  /** The highest stored sequence of {@code id}, 0 if none. */
  long lastSequence(String id) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT coalesce(max(sequence), 0) FROM " + table + " WHERE id = ?")) {
      ps.setString(1, id);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  /** Appends {@code events} of {@code id} in one transaction; retried identical events pass, others throw {@link Conflict}. */
  void append(String id, List<Stored> events) throws SQLException {
    if (events.isEmpty()) {
      return;
    }
    try (Connection c = dataSource.getConnection()) {
      boolean auto = c.getAutoCommit();
      c.setAutoCommit(false);
      try {
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + table + " (id, sequence, type, data)"
            + " VALUES (?, ?, ?, ?) ON CONFLICT (id, sequence) DO NOTHING")) {
          for (Stored e : events) {
            ps.setString(1, id);
            ps.setLong(2, e.sequence());
            ps.setString(3, e.type());
            ps.setString(4, e.data());
            ps.addBatch();
          }
          int[] counts = ps.executeBatch();
          List<Stored> retried = new ArrayList<>();
          for (int i = 0; i < counts.length; i++) {
            if (counts[i] == 0) {
              retried.add(events.get(i));
            }
          }
          if (!retried.isEmpty()) {
            try (PreparedStatement check = c.prepareStatement(
                "SELECT type, data FROM " + table + " WHERE id = ? AND sequence = ?")) {
              for (Stored e : retried) {
                check.setString(1, id);
                check.setLong(2, e.sequence());
                try (ResultSet rs = check.executeQuery()) {
                  if (!rs.next() || !rs.getString(1).equals(e.type()) || !rs.getString(2).equals(e.data())) {
                    throw new Conflict();
                  }
                }
              }
            }
          }
        }
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      } finally {
        c.setAutoCommit(auto);
      }
    }
  }

  /** Up to {@code max} events of {@code id} after {@code sequence}, in order. */
  List<Stored> after(String id, long sequence, int max) throws SQLException {
    List<Stored> out = new ArrayList<>();
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT sequence, type, data FROM " + table
            + " WHERE id = ? AND sequence > ? ORDER BY sequence LIMIT ?")) {
      ps.setString(1, id);
      ps.setLong(2, sequence);
      ps.setInt(3, max);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          out.add(new Stored(rs.getLong(1), rs.getString(2), rs.getString(3)));
        }
      }
    }
    return out;
  }

  /** Deletes events of {@code id} more than {@code retained} behind its last one. */
  void prune(String id, long last, int retained) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement("DELETE FROM " + table + " WHERE id = ? AND sequence <= ?")) {
      ps.setString(1, id);
      ps.setLong(2, last - retained);
      ps.executeUpdate();
    }
  }
}
