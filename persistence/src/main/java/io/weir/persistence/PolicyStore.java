package io.weir.persistence;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.TreeSet;

/**
 * Collection policies in {@code <schema>.collection_policies}: a collection's sensitive top-level
 * fields and its row-visibility rule. Every change takes a new version from {@code
 * <schema>.policy_versions}, so versions never repeat, even across a policy set back to an earlier
 * shape.
 */
public final class PolicyStore {
  private PolicyStore() {}

  /** How a collection's rows are restricted. */
  public enum Visibility {
    /** Every holder of the collection's grants sees every row. */
    NONE,
    /** The field lists who may see the row: principal ids and {@code "group:<name>"} entries. */
    ACL,
    /** The field names the one principal that may see the row. */
    OWNER;

    public String wire() {
      return name().toLowerCase(Locale.ROOT);
    }

    public static Visibility ofWire(String wire) {
      return valueOf(wire.toUpperCase(Locale.ROOT));
    }
  }

  /**
   * A collection's policy.
   *
   * @param version 0 for a collection without a stored policy
   * @param sensitiveFields top-level fields shown only to holders of {@code FieldRead} on them
   * @param visibilityField the ACL or owner field; null with {@link Visibility#NONE}
   */
  public record CollectionPolicy(
      String collection,
      long version,
      List<String> sensitiveFields,
      Visibility visibility,
      String visibilityField) {
    public CollectionPolicy {
      Objects.requireNonNull(collection, "collection");
      sensitiveFields = List.copyOf(new TreeSet<>(sensitiveFields));
      Objects.requireNonNull(visibility, "visibility");
      if ((visibility == Visibility.NONE) != (visibilityField == null)) {
        throw new IllegalArgumentException("a visibility rule names a field, and only then");
      }
    }

    /** The policy of a collection nobody configured: no sensitive fields, every row visible. */
    public static CollectionPolicy none(String collection) {
      return new CollectionPolicy(collection, 0, List.of(), Visibility.NONE, null);
    }
  }

  /**
   * Stores {@code policy} (its version is ignored) under a new version and returns the version. Of
   * two concurrent changes the one with the higher version wins whatever the commit order (the
   * other returns the winner's version).
   */
  public static long put(Connection c, String schema, CollectionPolicy policy) throws SQLException {
    String table = Identifiers.require("schema name", schema) + ".collection_policies";
    try (PreparedStatement s =
        c.prepareStatement(
            "INSERT INTO "
                + table
                + " (collection, version, sensitive_fields, visibility, visibility_field)"
                + " VALUES (?, nextval('"
                + schema
                + ".policy_versions'), ?, ?, ?)"
                + " ON CONFLICT (collection) DO UPDATE SET version = excluded.version, sensitive_fields = excluded.sensitive_fields,"
                + " visibility = excluded.visibility, visibility_field = excluded.visibility_field, updated_at = clock_timestamp()"
                + " WHERE "
                + table
                + ".version < excluded.version"
                + " RETURNING version")) {
      s.setString(1, policy.collection());
      s.setArray(2, c.createArrayOf("text", policy.sensitiveFields().toArray()));
      s.setString(3, policy.visibility().wire());
      s.setString(4, policy.visibilityField());
      try (ResultSet rs = s.executeQuery()) {
        if (rs.next()) {
          return rs.getLong(1);
        }
      }
    }
    try (PreparedStatement s =
        c.prepareStatement("SELECT version FROM " + table + " WHERE collection = ?")) {
      s.setString(1, policy.collection());
      try (ResultSet rs = s.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  /** Every stored policy, by collection. */
  public static List<CollectionPolicy> load(Connection c, String schema) throws SQLException {
    String table = Identifiers.require("schema name", schema) + ".collection_policies";
    List<CollectionPolicy> out = new ArrayList<>();
    try (PreparedStatement s =
            c.prepareStatement(
                "SELECT collection, version, sensitive_fields, visibility, visibility_field"
                    + " FROM "
                    + table
                    + " ORDER BY collection");
        ResultSet rs = s.executeQuery()) {
      while (rs.next()) {
        out.add(
            new CollectionPolicy(
                rs.getString(1),
                rs.getLong(2),
                List.of((String[]) rs.getArray(3).getArray()),
                Visibility.ofWire(rs.getString(4)),
                rs.getString(5)));
      }
    }
    return out;
  }
}
