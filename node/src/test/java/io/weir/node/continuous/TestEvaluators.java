package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.continuous.spi.ContinuousEvaluator;
import io.weir.node.continuous.spi.ContinuousProjector;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

/** Evaluators installed in the node's tests (META-INF/services in the test resources). */
final class TestEvaluators {
  private TestEvaluators() {}

  /** Runs {@code sql} with the affected integer ids bound as one array. */
  static List<ObjectNode> byId(
      ContinuousEvaluator.Context context, List<List<String>> keys, String sql)
      throws SQLException {
    List<Integer> ids = new ArrayList<>();
    for (List<String> k : keys) {
      ids.add(Integer.parseInt(k.get(0)));
    }
    try (PreparedStatement ps = context.connection().prepareStatement(sql)) {
      ps.setArray(1, context.connection().createArrayOf("int4", ids.toArray()));
      return context.rows(ps);
    }
  }

  static final String RANKED = "SELECT id, score, label FROM ranked";

  static boolean isRanked(ContinuousEvaluator.Query q) {
    return q.sql().trim().equalsIgnoreCase(RANKED)
        && q.keyColumns().equals(List.of("id"))
        && "public.ranked".equals(q.impactTable())
        && q.columns().equals(List.of("id", "score", "label"));
  }

  /** Exact for {@link #RANKED}: the rows by primary key, {@code id = ANY(?)}. */
  public static final class RankedById implements ContinuousEvaluator {
    @Override
    public String name() {
      return "ranked-by-id";
    }

    @Override
    public boolean covers(Query query) {
      return isRanked(query);
    }

    @Override
    public List<ObjectNode> evaluate(Context context, List<List<String>> keys) throws SQLException {
      return byId(context, keys, "SELECT id, score, label FROM ranked WHERE id = ANY(?)");
    }
  }

  /**
   * Exact for ContinuousOracleIT's {@code SELECT id, score, name FROM items}: rows by primary key.
   */
  public static final class ItemsById implements ContinuousEvaluator {
    @Override
    public String name() {
      return "items-by-id";
    }

    @Override
    public boolean covers(Query query) {
      return query.sql().trim().equalsIgnoreCase("SELECT id, score, name FROM items")
          && query.keyColumns().equals(List.of("id"))
          && "public.items".equals(query.impactTable());
    }

    @Override
    public List<ObjectNode> evaluate(Context context, List<List<String>> keys) throws SQLException {
      return byId(context, keys, "SELECT id, score, name FROM items WHERE id = ANY(?)");
    }
  }

  /**
   * A projector for a single-table query keyed by an integer {@code id}: the rows straight from the
   * change tuples. The fingerprint is set by the test from the plan fingerprint a session's status
   * shows, as an author would copy it.
   */
  abstract static class IdProjector implements ContinuousProjector {
    /** The result row of a visible new image, or null when {@code loginRole} may not see it. */
    abstract ObjectNode row(java.util.Map<String, String> after, String loginRole);

    @Override
    public List<ObjectNode> project(
        ContinuousEvaluator.Query query, String loginRole, List<RowChange> changes) {
      java.util.Map<Integer, ObjectNode> rows = new java.util.LinkedHashMap<>();
      for (RowChange c : changes) {
        if (c.before() != null) {
          rows.put(Integer.parseInt(c.before().get("id")), null);
        }
        if (c.after() != null) {
          rows.put(Integer.parseInt(c.after().get("id")), row(c.after(), loginRole));
        }
      }
      List<ObjectNode> out = new ArrayList<>();
      rows.values().stream().filter(java.util.Objects::nonNull).forEach(out::add);
      return out;
    }

    static ObjectNode idAndScore(java.util.Map<String, String> after) {
      return com.fasterxml.jackson.databind.node.JsonNodeFactory.instance
          .objectNode()
          .put("id", Integer.parseInt(after.get("id")))
          .put("score", Integer.parseInt(after.get("score")));
    }
  }

  /** Tier 1 for {@link #RANKED} (no row-level security). */
  public static final class RankedProjector extends IdProjector {
    static volatile String fingerprint = "unset";

    @Override
    public String name() {
      return "ranked-projector";
    }

    @Override
    public String fingerprint() {
      return fingerprint;
    }

    @Override
    public boolean enforcesRowSecurity() {
      return false;
    }

    @Override
    ObjectNode row(java.util.Map<String, String> after, String loginRole) {
      return idAndScore(after).put("label", after.get("label"));
    }
  }

  /**
   * Tier 1 for ContinuousOracleIT's {@code SELECT id, score, name FROM items}, whose table has the
   * policy {@code tenant = current_user}: it applies the policy itself with the login role.
   */
  public static final class ItemsProjector extends IdProjector {
    static volatile String fingerprint = "unset";

    @Override
    public String name() {
      return "items-projector";
    }

    @Override
    public String fingerprint() {
      return fingerprint;
    }

    @Override
    public boolean enforcesRowSecurity() {
      return true;
    }

    @Override
    ObjectNode row(java.util.Map<String, String> after, String loginRole) {
      return loginRole.equals(after.get("tenant"))
          ? idAndScore(after).put("name", after.get("name"))
          : null;
    }
  }

  /** Claims coverage but returns rows with an extra column: every delta falls back. */
  public static final class BrokenShape implements ContinuousEvaluator {
    @Override
    public String name() {
      return "broken-shape";
    }

    @Override
    public boolean covers(Query query) {
      return isRanked(query);
    }

    @Override
    public List<ObjectNode> evaluate(Context context, List<List<String>> keys) throws SQLException {
      List<ObjectNode> rows = new RankedById().evaluate(context, keys);
      rows.forEach(r -> r.put("extra", 1));
      return rows;
    }
  }

  /**
   * {@link RankedById} that, once armed, throws an {@link Error} (as a plugin missing a class
   * would) on its next call, then works again.
   */
  public static final class FailsOnce implements ContinuousEvaluator {
    static final java.util.concurrent.atomic.AtomicBoolean ARMED =
        new java.util.concurrent.atomic.AtomicBoolean();
    static final java.util.concurrent.atomic.AtomicInteger THROWN =
        new java.util.concurrent.atomic.AtomicInteger();

    @Override
    public String name() {
      return "ranked-fails-once";
    }

    @Override
    public boolean covers(Query query) {
      return isRanked(query);
    }

    @Override
    public List<ObjectNode> evaluate(Context context, List<List<String>> keys) throws SQLException {
      if (ARMED.compareAndSet(true, false)) {
        THROWN.incrementAndGet();
        throw new NoClassDefFoundError("a class the plugin needs (test)");
      }
      return new RankedById().evaluate(context, keys);
    }
  }

  /** Covers nothing: a registration naming it is refused. */
  public static final class CoversNothing implements ContinuousEvaluator {
    @Override
    public String name() {
      return "covers-nothing";
    }

    @Override
    public boolean covers(Query query) {
      return false;
    }

    @Override
    public List<ObjectNode> evaluate(Context context, List<List<String>> keys) {
      throw new AssertionError("never called");
    }
  }
}
