package io.weir.node.continuous;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.continuous.spi.ContinuousEvaluator;
import io.weir.node.continuous.spi.ContinuousProjector;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.postgresql.PGResultSetMetaData;

/**
 * Compiles a registration into a {@link Definition} and its subscription id, on the scope's own
 * login in one read-only transaction:
 *
 * <ol>
 *   <li>the lexical allow-list ({@link ContinuousSql}), parameter names and JSON types;
 *   <li>{@code EXPLAIN (VERBOSE, FORMAT JSON)} of the base with the parameters bound: PostgreSQL
 *       parses, resolves and plans it (syntax, unknown relations or columns, parameter types,
 *       privileges and row-level security of the role); the plan's relation names are the table
 *       set, unless the query or the plan calls a function that is not built in (it may read any
 *       table), in which case the table set is unknown and every transaction counts;
 *   <li>the result's columns: key and ORDER BY columns must be among them;
 *   <li>one full authoritative read: ORDER BY must be valid and the keys unique;
 *   <li>each table of the set must be published to the continuous pipeline;
 *   <li>the policy version: a digest of the row-level-security flags and policies of those tables.
 * </ol>
 *
 * The id is a digest of database, plan fingerprint, parameters, scope and login role, policy
 * version and limit. PostgreSQL's error texts are never passed on (they can quote values): only the
 * SQLState and a fixed description.
 */
final class Registrar {
  static final ObjectMapper CANONICAL =
      new ObjectMapper().configure(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS, true);

  /** PostgreSQL's first OID for user objects: below it, everything is built in. */
  private static final long FIRST_NORMAL_OID = 16384;

  /** A compiled registration. */
  record Compiled(String id, String scope, String loginRole, Definition definition) {}

  private Registrar() {}

  static Compiled compile(
      ContinuousRequest r,
      ScopeReader reader,
      List<String> publications,
      Map<String, ContinuousEvaluator> evaluators,
      Map<String, ContinuousProjector> projectors) {
    ContinuousSql.Parsed parsed = ContinuousSql.parse(r.sql());
    Set<String> names = parsed.parameterNames();
    for (String name : names) {
      if (!r.parameters().has(name)) {
        throw new ContinuousQueryException(
            ErrorCode.INVALID_PARAMETER,
            name.matches("[A-Za-z_][A-Za-z0-9_]{0,62}")
                ? "the query uses parameter :" + name + ", which the request does not give"
                : "the query uses a parameter the request does not give");
      }
    }
    for (var it = r.parameters().fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      if (!names.contains(e.getKey())) {
        throw new ContinuousQueryException(
            ErrorCode.INVALID_PARAMETER,
            e.getKey().matches("[A-Za-z_][A-Za-z0-9_]{0,62}")
                ? "parameter " + e.getKey() + " is not used by the query"
                : "a parameter is not used by the query");
      }
      JsonNode v = e.getValue();
      if (!(v.isTextual() || v.isNumber() || v.isBoolean() || v.isNull())) {
        throw new ContinuousQueryException(
            ErrorCode.INVALID_PARAMETER,
            "parameter " + e.getKey() + " must be a string, number, boolean or null");
      }
    }
    try {
      return reader.readOnly(
          c -> compile(c, r, parsed, reader.scope(), publications, evaluators, projectors));
    } catch (SQLException e) {
      throw fromPostgres(e);
    }
  }

  /**
   * What a plan says about a query: the plan, its scans, node types, table set and result columns.
   */
  record Facts(
      JsonNode plan,
      Map<String, Integer> scans,
      Set<String> nodeTypes,
      List<String> tableSet,
      List<String> columns,
      List<String> columnTypes,
      List<String[]> origins) {}

  /**
   * Plans {@code parsed} on {@code c} (the scope's login) and describes it: 1. the plan, its tables
   * and whether anything it calls may read other tables (refused: forbidden or volatile calls); 2.
   * the result's columns with their types and origins.
   */
  static Facts facts(Connection c, ContinuousSql.Parsed parsed, ObjectNode parameters)
      throws SQLException {
    String base = "SELECT * FROM (" + parsed.jdbcSql() + "\n) AS weir_base";
    // 1. Plan: tables, and whether anything it calls may read other tables.
    JsonNode plan;
    try (PreparedStatement ps = c.prepareStatement("EXPLAIN (VERBOSE, FORMAT JSON) " + base)) {
      ScopeReader.bind(ps, parsed.parameterOrder(), parameters);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        plan = CANONICAL.readTree(rs.getString(1));
      } catch (IOException e) {
        throw new SQLException("the plan is not JSON", "XX000");
      }
    }
    TreeSet<String> tables = new TreeSet<>();
    TreeSet<String> calls = new TreeSet<>(parsed.functions());
    ImpactPlan.walk(plan, tables, calls);
    Map<String, Integer> scans = new TreeMap<>();
    Set<String> nodeTypes = new TreeSet<>();
    ImpactPlan.scans(plan, scans, nodeTypes);
    // The plan shows every call PostgreSQL will make, however the text spelled it: no function that
    // runs SQL from text or reaches outside the query, and no volatile function (side effects such
    // as advisory locks; and a result must be a function of the data).
    for (String call : calls) {
      if (ContinuousSql.forbiddenInPlan(call)) {
        throw ContinuousSql.forbiddenCall();
      }
    }
    boolean userFunctions;
    boolean volatileCalls;
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT count(*) FILTER (WHERE oid >= ?),"
                + " count(*) FILTER (WHERE provolatile = 'v') FROM pg_proc WHERE proname = ANY(?)")) {
      ps.setLong(1, FIRST_NORMAL_OID);
      ps.setArray(2, c.createArrayOf("text", calls.toArray()));
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        userFunctions = rs.getLong(1) > 0;
        volatileCalls = rs.getLong(2) > 0;
      }
    }
    if (volatileCalls) {
      throw ContinuousSql.forbiddenCall();
    }
    // Fail closed: no table seen, partitions (a partition attached later, subplans pruned at run
    // time) or inheritance children make the set unknown, and every transaction counts.
    boolean unknownTables =
        userFunctions || tables.isEmpty() || plan.toString().contains("\"Subplans Removed\"");
    if (!unknownTables) {
      try (PreparedStatement ps =
          c.prepareStatement(
              "SELECT count(*) FROM pg_class"
                  + " WHERE oid IN (SELECT to_regclass(t) FROM unnest(?::text[]) AS t)"
                  + " AND (relispartition OR relkind = 'p' OR relhassubclass)")) {
        ps.setArray(1, c.createArrayOf("text", tables.toArray()));
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          unknownTables = rs.getLong(1) > 0;
        }
      }
    }
    List<String> tableSet = unknownTables ? null : List.copyOf(tables);

    // 2. Columns.
    List<String> columns = new ArrayList<>();
    List<String> columnTypes = new ArrayList<>();
    List<String[]> origins = new ArrayList<>(); // {schema, table, column} or null, per column
    try (PreparedStatement ps = c.prepareStatement(base + " LIMIT 0")) {
      ScopeReader.bind(ps, parsed.parameterOrder(), parameters);
      try (ResultSet rs = ps.executeQuery()) {
        ResultSetMetaData md = rs.getMetaData();
        PGResultSetMetaData pg = md.unwrap(PGResultSetMetaData.class);
        for (int i = 1; i <= md.getColumnCount(); i++) {
          if (columns.contains(md.getColumnLabel(i))) {
            throw new ContinuousQueryException(
                ErrorCode.QUERY_NOT_ALLOWED, "the result's column names must be unique");
          }
          columns.add(md.getColumnLabel(i));
          columnTypes.add(md.getColumnTypeName(i));
          String table = pg.getBaseTableName(i);
          origins.add(
              table == null || table.isEmpty()
                  ? null
                  : new String[] {pg.getBaseSchemaName(i), table, pg.getBaseColumnName(i)});
        }
      }
    }
    return new Facts(plan, scans, nodeTypes, tableSet, columns, columnTypes, origins);
  }

  /** The table set and impact rules a registered query has under the catalog now. */
  record Replanned(List<String> tables, Definition.Impact impact) {}

  /**
   * Plans a registered query again (as its scope's login, after a catalog change or when its
   * session starts): its table set and impact rules now. Nothing else of the registration is
   * checked again.
   */
  static Replanned replan(Connection c, Definition d, List<String> publications)
      throws SQLException {
    ContinuousSql.Parsed parsed = ContinuousSql.parse(d.sql());
    Facts f;
    try {
      f = facts(c, parsed, d.parameters());
    } catch (ContinuousQueryException refused) {
      // The plan now calls something a registration would refuse (e.g. a policy calling a volatile
      // function): not a transient failure; nothing about the tables is known.
      return new Replanned(null, null);
    }
    for (String k : d.keyColumns()) {
      if (!f.columns().contains(k)) {
        return new Replanned(null, null); // the result changed shape: nothing is known
      }
    }
    if (unpublished(c, f.tableSet(), publications) != null) {
      // A table read now (by a policy added since) whose changes never reach the pipeline: a table
      // set naming it would call transactions of the others unrelated. Every transaction counts.
      return new Replanned(null, null);
    }
    Definition.Impact impact =
        ImpactPlan.rule(
            c,
            d.keyColumns(),
            d.orderBy(),
            f.columns(),
            f.origins(),
            f.tableSet(),
            f.scans(),
            f.nodeTypes(),
            f.plan());
    return new Replanned(f.tableSet(), impact);
  }

  /**
   * The first table of {@code tableSet} not published to {@code publications} whole (with no row
   * filter in at least one of them), or null.
   */
  private static String unpublished(Connection c, List<String> tableSet, List<String> publications)
      throws SQLException {
    if (tableSet == null || tableSet.isEmpty()) {
      return null;
    }
    // Published whole: by at least one of the publications without a row filter. Under a filter,
    // an insert outside it never arrives and an update leaving it arrives as a delete.
    Set<String> published = new TreeSet<>();
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = ANY(?)"
                + " GROUP BY schemaname, tablename HAVING bool_or(rowfilter IS NULL)")) {
      ps.setArray(1, c.createArrayOf("text", publications.toArray()));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          published.add(rs.getString(1));
        }
      }
    }
    for (String t : tableSet) {
      if (!published.contains(t)) {
        return t;
      }
    }
    return null;
  }

  private static Compiled compile(
      Connection c,
      ContinuousRequest r,
      ContinuousSql.Parsed parsed,
      ContinuousSettings.Scope scope,
      List<String> publications,
      Map<String, ContinuousEvaluator> evaluators,
      Map<String, ContinuousProjector> projectors)
      throws SQLException {
    Facts facts = facts(c, parsed, r.parameters());
    JsonNode plan = facts.plan();
    Map<String, Integer> scans = facts.scans();
    Set<String> nodeTypes = facts.nodeTypes();
    List<String> tableSet = facts.tableSet();
    List<String> columns = facts.columns();
    List<String> columnTypes = facts.columnTypes();
    List<String[]> origins = facts.origins();
    for (String k : r.keyColumns()) {
      if (!columns.contains(k)) {
        throw new ContinuousQueryException(
            ErrorCode.UNKNOWN_COLUMN, "a key column is not a column of the result");
      }
    }
    for (Definition.OrderColumn o : r.orderBy()) {
      if (!columns.contains(o.column())) {
        throw new ContinuousQueryException(
            ErrorCode.UNKNOWN_COLUMN, "an ORDER BY column is not a column of the result");
      }
    }
    Definition.Impact impact =
        ImpactPlan.rule(
            c, r.keyColumns(), r.orderBy(), columns, origins, tableSet, scans, nodeTypes, plan);
    Map<String, Object> planPrint = new LinkedHashMap<>();
    planPrint.put("sql", parsed.normalized());
    planPrint.put("columns", columns);
    planPrint.put("types", columnTypes);
    planPrint.put("keys", r.keyColumns());
    planPrint.put(
        "order",
        r.orderBy().stream().map(o -> o.column() + (o.descending() ? " desc" : " asc")).toList());
    String planFingerprint = sha256(canonical(planPrint));
    Definition definition =
        new Definition(
            r.sql(),
            r.parameters(),
            r.keyColumns(),
            r.orderBy(),
            r.limit(),
            columns,
            tableSet,
            columnTypes,
            impact,
            r.maintenance(),
            r.evaluator(),
            r.projector(),
            planFingerprint);
    if (r.projector() != null) {
      trustedProjector(c, projectors.get(r.projector()), definition);
    }
    if (r.evaluator() != null) {
      ContinuousEvaluator evaluator = evaluators.get(r.evaluator());
      if (evaluator == null) {
        throw new ContinuousQueryException(
            ErrorCode.BAD_REQUEST, "no evaluator of that name is installed on this node");
      }
      if (impact == null) {
        throw new ContinuousQueryException(
            ErrorCode.QUERY_NOT_ALLOWED,
            "an evaluator replaces the scoped delta,"
                + " which needs an impact rule this query does not have (docs/continuous.md, \"Impact plan\")");
      }
      boolean covers;
      try {
        covers = evaluator.covers(definition.query());
      } catch (RuntimeException e) {
        throw new ContinuousQueryException(
            ErrorCode.QUERY_NOT_ALLOWED,
            "the evaluator failed to say whether it covers this query");
      }
      if (!covers) {
        throw new ContinuousQueryException(
            ErrorCode.QUERY_NOT_ALLOWED,
            "the evaluator does not declare exact coverage of this query");
      }
    }

    // 3. One full read: ORDER BY must work and keys must be unique.
    try (PreparedStatement ps = c.prepareStatement(definition.wrapped(parsed.jdbcSql()))) {
      ScopeReader.bind(ps, parsed.parameterOrder(), r.parameters());
      uniqueKeys(ScopeReader.rows(ps, r.keyColumns()));
    }

    // 4. Published tables.
    String unpublished = unpublished(c, tableSet, publications);
    if (unpublished != null) {
      throw new ContinuousQueryException(
          ErrorCode.TABLE_NOT_PUBLISHED,
          "table "
              + unpublished
              + " is read by the query but not published to the continuous pipeline, or only with a row"
              + " filter: some of its changes would not be seen");
    }

    // 5. Policy version, database and login.
    String policyVersion;
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT coalesce(string_agg(concat_ws(':', c.oid::regclass::text, c.relrowsecurity::text, c.relforcerowsecurity::text,"
                + " (SELECT string_agg(concat_ws('/', p.polname::text, p.polcmd::text, p.polpermissive::text, p.polroles::text,"
                + " pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)), ';' ORDER BY p.polname)"
                + " FROM pg_policy p WHERE p.polrelid = c.oid)), ',' ORDER BY c.oid::regclass::text), '')"
                + " FROM pg_class c WHERE CASE WHEN ?::text[] IS NULL THEN c.relrowsecurity OR c.oid IN (SELECT polrelid FROM pg_policy)"
                + " ELSE c.oid IN (SELECT to_regclass(t)::oid FROM unnest(?::text[]) AS t) END")) {
      Array arr = tableSet == null ? null : c.createArrayOf("text", tableSet.toArray());
      ps.setArray(1, arr);
      ps.setArray(2, arr);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        policyVersion = sha256(rs.getString(1));
      }
    }
    String database;
    String role;
    try (PreparedStatement ps = c.prepareStatement("SELECT current_database(), current_user")) {
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        database = rs.getString(1);
        role = rs.getString(2);
      }
    }
    Map<String, Object> identity = new TreeMap<>();
    identity.put("database", scope.url().replaceFirst("\\?.*$", "") + "#" + database);
    identity.put("plan", planFingerprint);
    identity.put("parameters", r.parameters());
    identity.put("scope", scope.name());
    identity.put("role", role);
    identity.put("policyVersion", policyVersion);
    identity.put("limit", r.limit());
    if (!definition.incremental()) {
      identity.put(
          "maintenance", r.maintenance()); // absent by default, so earlier ids stay the same
    }
    if (r.evaluator() != null) {
      identity.put("evaluator", r.evaluator());
    }
    if (r.projector() != null) {
      identity.put("projector", r.projector());
    }
    String id = "cq_" + sha256(canonical(identity)).substring(0, 32);
    return new Compiled(id, scope.name(), role, definition);
  }

  /**
   * The registration-time conditions of tier 1 (docs/continuous.md, "Tier 1"): the projector is
   * installed and written for this plan; the query reads only its key table, which has replica
   * identity FULL; row-level security on that table needs a projector that enforces it.
   */
  private static void trustedProjector(Connection c, ContinuousProjector projector, Definition d)
      throws SQLException {
    if (projector == null) {
      throw new ContinuousQueryException(
          ErrorCode.BAD_REQUEST, "no projector of that name is installed on this node");
    }
    String refused = projectorConditions(c, projector, d);
    if (refused != null) {
      throw new ContinuousQueryException(ErrorCode.QUERY_NOT_ALLOWED, refused);
    }
  }

  /**
   * Why {@code projector} may not maintain {@code d} in the catalog {@code c} sees (a value-free
   * sentence), or null when every registration-time condition of tier 1 holds.
   */
  static String projectorConditions(Connection c, ContinuousProjector projector, Definition d)
      throws SQLException {
    if (projector == null) {
      return "the projector is not installed on this node";
    }
    if (d.planFingerprint() == null || !d.planFingerprint().equals(projector.fingerprint())) {
      return "the projector was written for another plan: its fingerprint does not match this query's";
    }
    if (d.impact() == null
        || d.tables() == null
        || !d.tables().equals(List.of(d.impact().table()))) {
      return "a projector needs a query that reads one table, the one its keys come from";
    }
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT relreplident, relrowsecurity FROM pg_class WHERE oid = to_regclass(?)")) {
      ps.setString(1, d.impact().table());
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return "the query's table is not visible to the scope";
        }
        if (!"f".equals(rs.getString(1))) {
          return "a projector needs the table to have REPLICA IDENTITY FULL: without complete old values it cannot"
              + " know what a change replaced";
        }
        if (rs.getBoolean(2) && !projector.enforcesRowSecurity()) {
          return "the table has row-level security and the projector does not declare that it enforces it";
        }
      }
    }
    return null;
  }

  static void uniqueKeys(List<ResultRow> rows) {
    Set<String> seen = new HashSet<>();
    for (ResultRow row : rows) {
      if (!seen.add(row.keyText())) {
        throw new ContinuousQueryException(
            ErrorCode.BAD_REQUEST,
            "the key columns do not identify rows: two rows of the result have the same key");
      }
    }
  }

  /** Maps a PostgreSQL failure during registration to a typed, value-free error. */
  static RuntimeException fromPostgres(SQLException e) {
    String state = SafeErrors.sqlState(e);
    if (state == null) {
      return new ContinuousQueryException(
          ErrorCode.UNAVAILABLE,
          "the scope's database could not be reached; retry (" + SafeErrors.describe(e) + ")");
    }
    return switch (state) {
      case "22P02", "22003", "22007", "22008", "22023", "42P18", "42P08", "42804" ->
          new ContinuousQueryException(
              ErrorCode.INVALID_PARAMETER,
              "a parameter does not fit where the query uses it (SQLState "
                  + state
                  + "); a parameter whose type PostgreSQL cannot infer needs a cast, e.g. :name::int");
      case "42501" ->
          new ContinuousQueryException(
              ErrorCode.FORBIDDEN,
              "the scope's login role may not read a relation or call a function the query uses (SQLState 42501)");
      case "25006" ->
          new ContinuousQueryException(
              ErrorCode.QUERY_NOT_ALLOWED,
              "the query tries to write in a read-only transaction (SQLState 25006)");
      case "57014" ->
          new ContinuousQueryException(
              ErrorCode.BAD_REQUEST,
              "the query did not finish within the statement timeout (SQLState 57014)");
      default ->
          state.startsWith("42")
                  || state.startsWith("22")
                  || state.startsWith("0A")
                  || state.startsWith("2F")
                  || state.startsWith("38")
                  || state.startsWith("39")
              ? new ContinuousQueryException(
                  ErrorCode.INVALID_QUERY, "PostgreSQL refused the query (SQLState " + state + ")")
              : state.startsWith("08")
                      || state.startsWith("53")
                      || state.startsWith("57")
                      || state.startsWith("40")
                  ? new ContinuousQueryException(
                      ErrorCode.UNAVAILABLE,
                      "the scope's database is unavailable (SQLState " + state + "); retry")
                  : state.startsWith("28")
                      ? new ContinuousQueryException(
                          ErrorCode.UNAVAILABLE,
                          "the scope's login was refused by PostgreSQL (SQLState "
                              + state
                              + "); an administrator must fix the scope's credentials")
                      : new ContinuousQueryException(
                          ErrorCode.INVALID_QUERY,
                          "PostgreSQL refused the query (SQLState " + state + ")");
    };
  }

  static String canonical(Object value) {
    try {
      JsonNode tree = CANONICAL.valueToTree(value);
      return CANONICAL.writeValueAsString(sortKeys(tree));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot encode an identity", e);
    }
  }

  private static JsonNode sortKeys(JsonNode node) {
    if (node.isObject()) {
      ObjectNode out = CANONICAL.createObjectNode();
      TreeSet<String> names = new TreeSet<>();
      node.fieldNames().forEachRemaining(names::add);
      names.forEach(k -> out.set(k, sortKeys(node.get(k))));
      return out;
    }
    if (node.isArray()) {
      ArrayNode out = CANONICAL.createArrayNode();
      node.forEach(n -> out.add(sortKeys(n)));
      return out;
    }
    return node;
  }

  static String sha256(String text) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
