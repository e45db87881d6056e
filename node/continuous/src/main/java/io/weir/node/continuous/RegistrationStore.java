package io.weir.node.continuous;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.Identifiers;
import io.weir.protocol.ErrorCode;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.slf4j.LoggerFactory;

/** Registrations in {@code <schema>.continuous_query} (Weir's database, Weir's login). Blocking. */
public final class RegistrationStore {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** One stored registration. */
  public record Stored(
      String id, String scope, String loginRole, Definition definition, String createdBy) {}

  private final DataSource dataSource;
  private final String table;

  RegistrationStore(DataSource dataSource, String schema) {
    this.dataSource = dataSource;
    this.table = Identifiers.require("schema name", schema) + ".continuous_query";
  }

  /**
   * Stores {@code c} unless a row with its id exists; whether this call created it. A scope holding
   * {@code maxPerScope} registrations takes no new one ({@link ContinuousQueryException}
   * quota-exceeded); registering an existing one again is always answered. Registrations of one
   * scope are serialised by a transaction-scoped advisory lock, so the bound holds across nodes.
   */
  boolean insert(Registrar.Compiled c, String principal, int maxPerScope) throws SQLException {
    try (Connection conn = dataSource.getConnection()) {
      conn.setAutoCommit(false);
      try {
        try (PreparedStatement lock =
            conn.prepareStatement("SELECT pg_advisory_xact_lock(hashtext(?))")) {
          lock.setString(1, "weir.continuous_query." + c.scope());
          lock.execute();
        }
        long held;
        boolean exists;
        try (PreparedStatement count =
            conn.prepareStatement(
                "SELECT count(*), count(*) FILTER (WHERE id = ?) FROM "
                    + table
                    + " WHERE scope = ?")) {
          count.setString(1, c.id());
          count.setString(2, c.scope());
          try (ResultSet rs = count.executeQuery()) {
            rs.next();
            held = rs.getLong(1);
            exists = rs.getLong(2) > 0;
          }
        }
        if (exists) {
          conn.commit();
          return false;
        }
        if (held >= maxPerScope) {
          conn.rollback();
          throw new ContinuousQueryException(
              ErrorCode.QUOTA_EXCEEDED,
              "the scope holds its maximum of "
                  + maxPerScope
                  + " continuous queries (weir.continuous.max-registrations-per-scope); delete one first");
        }
        boolean created;
        try (PreparedStatement ps =
            conn.prepareStatement(
                "INSERT INTO "
                    + table
                    + " (id, scope, login_role, definition, created_by) VALUES (?, ?, ?, ?::jsonb, ?) ON CONFLICT (id) DO NOTHING")) {
          ps.setString(1, c.id());
          ps.setString(2, c.scope());
          ps.setString(3, c.loginRole());
          ps.setString(4, JSON.writeValueAsString(c.definition()));
          ps.setString(5, principal);
          created = ps.executeUpdate() == 1;
        }
        conn.commit();
        return created;
      } catch (SQLException | RuntimeException e) {
        conn.rollback();
        throw e;
      }
    } catch (IOException e) {
      throw new IllegalStateException("cannot encode a continuous query definition", e);
    }
  }

  Optional<Stored> find(String id) throws SQLException {
    try (Connection conn = dataSource.getConnection();
        PreparedStatement ps =
            conn.prepareStatement(
                "SELECT id, scope, login_role, definition::text, created_by FROM "
                    + table
                    + " WHERE id = ?")) {
      ps.setString(1, id);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? Optional.of(stored(rs)) : Optional.empty();
      }
    }
  }

  /** Ids of rows found unreadable (logged once each). */
  private final Set<String> unreadable = ConcurrentHashMap.newKeySet();

  /** Every registration's id and scope (no definitions: cheap enough to ask often). */
  Map<String, String> scopes() throws SQLException {
    Map<String, String> out = new HashMap<>();
    try (Connection conn = dataSource.getConnection();
        PreparedStatement ps = conn.prepareStatement("SELECT id, scope FROM " + table);
        ResultSet rs = ps.executeQuery()) {
      while (rs.next()) {
        out.put(rs.getString(1), rs.getString(2));
      }
    }
    return out;
  }

  List<Stored> all() throws SQLException {
    List<Stored> out = new ArrayList<>();
    try (Connection conn = dataSource.getConnection();
        PreparedStatement ps =
            conn.prepareStatement(
                "SELECT id, scope, login_role, definition::text, created_by FROM "
                    + table
                    + " ORDER BY created_at, id");
        ResultSet rs = ps.executeQuery()) {
      while (rs.next()) {
        try {
          out.add(stored(rs));
        } catch (SQLException notReadable) {
          // One row this version cannot read (written by another, or by hand) must not hide the
          // others: it is skipped, and said once per node (its id only).
          if (unreadable.add(rs.getString(1))) {
            LoggerFactory.getLogger(RegistrationStore.class)
                .warn(
                    "continuous query {}: its stored definition cannot be read; not maintained",
                    rs.getString(1));
          }
        }
      }
    }
    return out;
  }

  boolean delete(String id) throws SQLException {
    try (Connection conn = dataSource.getConnection();
        PreparedStatement ps = conn.prepareStatement("DELETE FROM " + table + " WHERE id = ?")) {
      ps.setString(1, id);
      return ps.executeUpdate() == 1;
    }
  }

  private static Stored stored(ResultSet rs) throws SQLException {
    try {
      return new Stored(
          rs.getString(1),
          rs.getString(2),
          rs.getString(3),
          JSON.readValue(rs.getString(4), Definition.class),
          rs.getString(5));
    } catch (IOException e) {
      throw new SQLException("a stored continuous query definition cannot be read", "XX000");
    }
  }
}
