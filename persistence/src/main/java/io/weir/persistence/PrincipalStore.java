package io.weir.persistence;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * Principals and their grants in {@code <schema>.principals} and {@code <schema>.grants}. A bearer
 * token is generated here, returned once and kept only as its SHA-256. Every change to a principal
 * (a grant, a revoked grant, revocation) advances its policy epoch in the same statement batch.
 */
public final class PrincipalStore {
  private static final SecureRandom RANDOM = new SecureRandom();

  /** The grants a principal can hold on a collection. */
  public static final Set<String> GRANTS =
      Set.of("DocumentsRead", "DocumentsWrite", "ChangesRead", "QueryRead", "ContinuousQuery");

  /**
   * Grants that name a top-level field: {@code FieldRead} shows a sensitive field, {@code FieldUse}
   * lets a query predicate use a field ({@code *}: every field that is not sensitive). Held as
   * {@code "FieldRead:<field>"} in {@link StoredPrincipal#grants()}.
   */
  public static final Set<String> FIELD_GRANTS = Set.of("FieldRead", "FieldUse");

  private static final Pattern FIELD = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");
  private static final Pattern GROUP = Pattern.compile("[A-Za-z0-9_.@-]{1,64}");

  private PrincipalStore() {}

  /**
   * A principal as stored.
   *
   * @param tokenHash SHA-256 of its bearer token; never logged
   * @param grants collection -> grant names ({@code "FieldRead:<field>"} for field grants)
   * @param groups the groups it belongs to (an ACL may name {@code "group:<name>"})
   * @param previousTokenHash SHA-256 of the token it had before its last rotation, accepted until
   *     {@code previousValidUntil}; null when there is none; never logged
   * @param previousValidUntil end of the previous token's grace period, or null
   */
  public record StoredPrincipal(
      String id,
      byte[] tokenHash,
      boolean administrator,
      long policyEpoch,
      Instant createdAt,
      Instant revokedAt,
      Map<String, Set<String>> grants,
      Set<String> groups,
      byte[] previousTokenHash,
      Instant previousValidUntil) {
    public StoredPrincipal(
        String id,
        byte[] tokenHash,
        boolean administrator,
        long policyEpoch,
        Instant createdAt,
        Instant revokedAt,
        Map<String, Set<String>> grants,
        Set<String> groups) {
      this(
          id,
          tokenHash,
          administrator,
          policyEpoch,
          createdAt,
          revokedAt,
          grants,
          groups,
          null,
          null);
    }

    @Override
    public String toString() {
      return "StoredPrincipal["
          + id
          + ", administrator="
          + administrator
          + ", policyEpoch="
          + policyEpoch
          + ", revoked="
          + (revokedAt != null)
          + "]";
    }
  }

  /** A refused change: unknown principal, a principal that exists, or a revoked one. */
  public static final class Refused extends Exception {
    private final boolean notFound;

    Refused(String message, boolean notFound) {
      super(message, null, false, false);
      this.notFound = notFound;
    }

    public boolean notFound() {
      return notFound;
    }
  }

  public static boolean validId(String id) {
    return id != null && id.matches("[A-Za-z0-9_.@-]{1,64}");
  }

  public static boolean validGroup(String group) {
    return group != null && GROUP.matcher(group).matches();
  }

  /** A top-level field name a grant or policy may name. */
  public static boolean validField(String field) {
    return field != null && FIELD.matcher(field).matches();
  }

  /** The grant string a field grant is held as. */
  public static String fieldGrant(String grant, String field) {
    return grant + ":" + field;
  }

  public static byte[] sha256(String token) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(token.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }

  /** Creates a principal and returns its bearer token (shown once, kept hashed). */
  public static String create(Connection c, String schema, String id, boolean administrator)
      throws SQLException, Refused {
    return create(c, schema, id, administrator, List.of());
  }

  /**
   * Creates a principal in {@code groups} and returns its bearer token (shown once, kept hashed).
   */
  public static String create(
      Connection c, String schema, String id, boolean administrator, List<String> groups)
      throws SQLException, Refused {
    String table = Identifiers.require("schema name", schema) + ".principals";
    String token = newToken();
    try (PreparedStatement s =
        c.prepareStatement(
            "INSERT INTO "
                + table
                + " (id, token_hash, administrator, groups) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING")) {
      s.setString(1, id);
      s.setBytes(2, sha256(token));
      s.setBoolean(3, administrator);
      s.setArray(4, c.createArrayOf("text", groups.stream().distinct().sorted().toArray()));
      if (s.executeUpdate() == 0) {
        throw new Refused(
            "a principal with this id exists (ids are never reused, revoked or not)", false);
      }
    }
    return token;
  }

  /** The longest grace period a rotation may give the previous token. */
  public static final Duration MAX_ROTATION_GRACE = Duration.ofDays(7);

  /**
   * A rotated principal's new token (shown once) and how long its previous token stays valid.
   *
   * @param previousValidUntil null when the grace period is zero (the previous token stopped at
   *     once)
   */
  public record Rotated(String token, Instant previousValidUntil) {
    @Override
    public String toString() {
      return "Rotated[previousValidUntil=" + previousValidUntil + "]";
    }
  }

  /**
   * Gives an active principal a new bearer token. The current token stays valid for {@code grace}
   * (zero: it stops at once); a token kept from an earlier rotation stops now. Grants and the
   * policy epoch do not change.
   */
  public static Rotated rotate(Connection c, String schema, String id, Duration grace)
      throws SQLException, Refused {
    if (grace.isNegative() || grace.compareTo(MAX_ROTATION_GRACE) > 0) {
      throw new IllegalArgumentException(
          "a rotation's grace period is 0 to " + MAX_ROTATION_GRACE.toHours() + " hours");
    }
    String table = Identifiers.require("schema name", schema) + ".principals";
    String token = newToken();
    boolean keep = !grace.isZero();
    try (PreparedStatement s =
        c.prepareStatement(
            "UPDATE "
                + table
                + " SET token_hash = ?,"
                + " previous_token_hash = CASE WHEN ? THEN token_hash END,"
                + " previous_valid_until = CASE WHEN ? THEN clock_timestamp() + ? * interval '1 millisecond' END"
                + " WHERE id = ? AND revoked_at IS NULL RETURNING previous_valid_until")) {
      s.setBytes(1, sha256(token));
      s.setBoolean(2, keep);
      s.setBoolean(3, keep);
      s.setLong(4, grace.toMillis());
      s.setString(5, id);
      try (ResultSet rs = s.executeQuery()) {
        if (!rs.next()) {
          throw new Refused("no active principal has this id", true);
        }
        Timestamp until = rs.getTimestamp(1);
        return new Rotated(token, until == null ? null : until.toInstant());
      }
    }
  }

  private static String newToken() {
    byte[] secret = new byte[32];
    RANDOM.nextBytes(secret);
    return "wp_" + Base64.getUrlEncoder().withoutPadding().encodeToString(secret);
  }

  /**
   * Revokes a principal: its token (and a previous one still in its grace period) stops working; it
   * keeps its id.
   */
  public static void revoke(Connection c, String schema, String id) throws SQLException, Refused {
    String table = Identifiers.require("schema name", schema) + ".principals";
    try (PreparedStatement s =
        c.prepareStatement(
            "UPDATE "
                + table
                + " SET revoked_at = coalesce(revoked_at, clock_timestamp()), policy_epoch = policy_epoch + 1,"
                + " previous_token_hash = NULL, previous_valid_until = NULL WHERE id = ?")) {
      s.setString(1, id);
      if (s.executeUpdate() == 0) {
        throw new Refused("no principal has this id", true);
      }
    }
  }

  /**
   * Grants ({@code add}) or revokes a grant on a collection; advances the policy epoch either way.
   */
  public static void changeGrant(
      Connection c, String schema, String id, String collection, String grant, boolean add)
      throws SQLException, Refused {
    changeGrant(c, schema, id, collection, grant, "", add);
  }

  /**
   * Grants ({@code add}) or revokes a grant on a collection ({@code field} empty) or one of its
   * fields ({@link #FIELD_GRANTS}); advances the policy epoch either way.
   */
  public static void changeGrant(
      Connection c,
      String schema,
      String id,
      String collection,
      String grant,
      String field,
      boolean add)
      throws SQLException, Refused {
    String principals = Identifiers.require("schema name", schema) + ".principals";
    String grants = schema + ".grants";
    boolean auto = c.getAutoCommit();
    c.setAutoCommit(false);
    try {
      try (PreparedStatement s =
          c.prepareStatement(
              "UPDATE "
                  + principals
                  + " SET policy_epoch = policy_epoch + 1 WHERE id = ? AND revoked_at IS NULL")) {
        s.setString(1, id);
        if (s.executeUpdate() == 0) {
          throw new Refused("no active principal has this id", true);
        }
      }
      try (PreparedStatement s =
          c.prepareStatement(
              add
                  ? "INSERT INTO "
                      + grants
                      + " (principal_id, collection, grant_name, field) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
                  : "DELETE FROM "
                      + grants
                      + " WHERE principal_id = ? AND collection = ? AND grant_name = ? AND field = ?")) {
        s.setString(1, id);
        s.setString(2, collection);
        s.setString(3, grant);
        s.setString(4, field);
        s.executeUpdate();
      }
      c.commit();
    } catch (SQLException | Refused | RuntimeException e) {
      c.rollback();
      throw e;
    } finally {
      c.setAutoCommit(auto);
    }
  }

  /** Every principal, revoked ones included, by id. */
  public static List<StoredPrincipal> load(Connection c, String schema) throws SQLException {
    String principals = Identifiers.require("schema name", schema) + ".principals";
    Map<String, Map<String, Set<String>>> grants = new TreeMap<>();
    try (PreparedStatement s =
            c.prepareStatement(
                "SELECT principal_id, collection, grant_name, field FROM " + schema + ".grants");
        ResultSet rs = s.executeQuery()) {
      while (rs.next()) {
        String field = rs.getString(4);
        grants
            .computeIfAbsent(rs.getString(1), k -> new TreeMap<>())
            .computeIfAbsent(rs.getString(2), k -> new TreeSet<>())
            .add(field.isEmpty() ? rs.getString(3) : fieldGrant(rs.getString(3), field));
      }
    }
    List<StoredPrincipal> out = new ArrayList<>();
    try (PreparedStatement s =
            c.prepareStatement(
                "SELECT id, token_hash, administrator, policy_epoch, created_at, revoked_at, groups,"
                    + " previous_token_hash, previous_valid_until FROM "
                    + principals
                    + " ORDER BY id");
        ResultSet rs = s.executeQuery()) {
      while (rs.next()) {
        Timestamp revoked = rs.getTimestamp(6);
        Map<String, Set<String>> mine = new LinkedHashMap<>();
        grants
            .getOrDefault(rs.getString(1), Map.of())
            .forEach((k, v) -> mine.put(k, Set.copyOf(v)));
        out.add(
            new StoredPrincipal(
                rs.getString(1),
                rs.getBytes(2),
                rs.getBoolean(3),
                rs.getLong(4),
                rs.getTimestamp(5).toInstant(),
                revoked == null ? null : revoked.toInstant(),
                Map.copyOf(mine),
                Set.of((String[]) rs.getArray(7).getArray()),
                rs.getBytes(8),
                rs.getTimestamp(9) == null ? null : rs.getTimestamp(9).toInstant()));
      }
    }
    return out;
  }
}
