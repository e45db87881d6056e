package io.weir.persistence;

import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The cluster's token-signing keys in {@code <schema>.token_keys}: every node reads the same keys.
 * The newest key not retired signs; every key not retired verifies. Keys retired by a restore from
 * a backup ({@link RestoreFence}) are loaded too, as fenced keys: their tokens are told apart as
 * issued before the restore. Key material never appears in a log line, a message or {@link
 * KeyRing#toString()}.
 */
public final class TokenKeyStore {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final int KEY_BYTES = 32;

  private TokenKeyStore() {}

  /**
   * A key's public facts.
   *
   * @param invalidatedByRestore retired by a restore from a backup: its tokens answer {@code
   *     token-invalidated}
   */
  public record KeyInfo(
      String kid,
      Instant createdAt,
      Instant retiredAt,
      boolean active,
      boolean invalidatedByRestore) {}

  /**
   * The keys as read at one moment.
   *
   * @param activeKid the key new tokens are signed with
   * @param keys every key not retired, by key id
   * @param fenced every key retired by a restore from a backup, by key id
   * @param info every key, retired ones included, oldest first
   * @param restoreEpoch how many times the cluster was restored from a backup
   * @param restoredAt when the last restore was fenced, or null
   */
  public record KeyRing(
      String activeKid,
      Map<String, byte[]> keys,
      Map<String, byte[]> fenced,
      List<KeyInfo> info,
      int restoreEpoch,
      Instant restoredAt) {
    public KeyRing {
      keys = copy(keys);
      fenced = copy(fenced);
      info = List.copyOf(info);
    }

    private static Map<String, byte[]> copy(Map<String, byte[]> keys) {
      Map<String, byte[]> copy = new LinkedHashMap<>();
      keys.forEach((kid, key) -> copy.put(kid, key.clone()));
      return Collections.unmodifiableMap(copy);
    }

    @Override
    public String toString() {
      return "KeyRing[active="
          + activeKid
          + ", keys="
          + keys.keySet()
          + ", fenced="
          + fenced.size()
          + ", restoreEpoch="
          + restoreEpoch
          + "]";
    }
  }

  /** A request that the key store refuses: unknown key id, or retiring the signing key. */
  public static final class KeyRefused extends Exception {
    private final boolean notFound;

    KeyRefused(String message, boolean notFound) {
      super(message, null, false, false);
      this.notFound = notFound;
    }

    public boolean notFound() {
      return notFound;
    }
  }

  public static KeyRing load(Connection c, String schema) throws SQLException {
    String table = Identifiers.require("schema name", schema) + ".token_keys";
    List<KeyInfo> info = new ArrayList<>();
    Map<String, byte[]> keys = new LinkedHashMap<>();
    Map<String, byte[]> fenced = new LinkedHashMap<>();
    String active = null;
    try (PreparedStatement s =
            c.prepareStatement(
                "SELECT kid, key, created_at, retired_at, invalidated_by_restore FROM "
                    + table
                    + " ORDER BY created_at, kid");
        ResultSet rs = s.executeQuery()) {
      List<Object[]> rows = new ArrayList<>();
      while (rs.next()) {
        Timestamp retired = rs.getTimestamp(4);
        rows.add(
            new Object[] {
              rs.getString(1),
              rs.getBytes(2),
              rs.getTimestamp(3).toInstant(),
              retired == null ? null : retired.toInstant(),
              rs.getBoolean(5)
            });
        if (retired == null) {
          active = rs.getString(1);
        }
      }
      for (Object[] r : rows) {
        String kid = (String) r[0];
        boolean restored = (Boolean) r[4];
        if (r[3] == null) {
          keys.put(kid, (byte[]) r[1]);
        } else if (restored) {
          fenced.put(kid, (byte[]) r[1]);
        }
        info.add(new KeyInfo(kid, (Instant) r[2], (Instant) r[3], kid.equals(active), restored));
      }
    }
    if (active == null) {
      throw new SQLException("the cluster has no token-signing key that is not retired", "55000");
    }
    int epoch = 0;
    Instant restoredAt = null;
    try (PreparedStatement s =
            c.prepareStatement("SELECT restore_epoch, restored_at FROM " + schema + ".cluster");
        ResultSet rs = s.executeQuery()) {
      if (rs.next()) {
        epoch = rs.getInt(1);
        Timestamp at = rs.getTimestamp(2);
        restoredAt = at == null ? null : at.toInstant();
      }
    }
    return new KeyRing(active, keys, fenced, info, epoch, restoredAt);
  }

  /**
   * Inserts a new random key (it signs from then on, being the newest not retired); returns its id.
   */
  static String insertKey(Connection c, String schema) throws SQLException {
    String table = Identifiers.require("schema name", schema) + ".token_keys";
    byte[] key = new byte[KEY_BYTES];
    RANDOM.nextBytes(key);
    byte[] id = new byte[6];
    RANDOM.nextBytes(id);
    String kid = "k" + HexFormat.of().formatHex(id);
    try (PreparedStatement s =
        c.prepareStatement("INSERT INTO " + table + " (kid, key) VALUES (?, ?)")) {
      s.setString(1, kid);
      s.setBytes(2, key);
      s.executeUpdate();
    }
    return kid;
  }

  /** Adds a new key, which signs from now on; the others still verify until retired. */
  public static KeyRing rotate(Connection c, String schema) throws SQLException {
    insertKey(c, schema);
    return load(c, schema);
  }

  /**
   * Retires a key: its tokens are refused from now on. The signing key cannot be retired (rotate
   * first), nor a key that stopped signing less than {@code minAge} ago: nodes that have not
   * reloaded the keys since may still sign with it.
   */
  public static KeyRing retire(Connection c, String schema, String kid, Duration minAge)
      throws SQLException, KeyRefused {
    KeyRing ring = load(c, schema);
    if (ring.info().stream().noneMatch(k -> k.kid().equals(kid))) {
      throw new KeyRefused("no token key has that id", true);
    }
    if (ring.activeKid().equals(kid)) {
      throw new KeyRefused("the key that signs new tokens cannot be retired; rotate first", false);
    }
    Instant signingSince =
        ring.info().stream().filter(KeyInfo::active).findFirst().orElseThrow().createdAt();
    if (Instant.now().isBefore(signingSince.plus(minAge))) {
      throw new KeyRefused(
          "the newest key signs since "
              + signingSince
              + "; other nodes may still sign with older keys"
              + " until they reload (weir.tokens.key-refresh): retire after "
              + signingSince.plus(minAge),
          false);
    }
    String table = Identifiers.require("schema name", schema) + ".token_keys";
    try (PreparedStatement s =
        c.prepareStatement(
            "UPDATE "
                + table
                + " SET retired_at = clock_timestamp() WHERE kid = ? AND retired_at IS NULL")) {
      s.setString(1, kid);
      s.executeUpdate();
    }
    return load(c, schema);
  }
}
