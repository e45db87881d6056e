package io.weir.node.continuous;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
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
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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
  private static final Pattern CALL = Pattern.compile("([A-Za-z_][A-Za-z0-9_]*)\\(");

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
    walk(plan, tables, calls);
    Map<String, Integer> scans = new TreeMap<>();
    Set<String> nodeTypes = new TreeSet<>();
    scans(plan, scans, nodeTypes);
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
        impact(
            c,
            d.keyColumns(),
            f.columns(),
            f.origins(),
            f.tableSet(),
            f.scans(),
            f.nodeTypes(),
            f.plan(),
            f.plan().toString());
    if (impact != null) {
      impact = withLookups(c, impact, f.plan(), f.tableSet(), f.scans());
    }
    return new Replanned(f.tableSet(), impact);
  }

  /** The first table of {@code tableSet} not published to {@code publications}, or null. */
  private static String unpublished(Connection c, List<String> tableSet, List<String> publications)
      throws SQLException {
    if (tableSet == null || tableSet.isEmpty()) {
      return null;
    }
    Set<String> published = new TreeSet<>();
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = ANY(?)")) {
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
        impact(
            c, r.keyColumns(), columns, origins, tableSet, scans, nodeTypes, plan, plan.toString());
    if (impact != null) {
      impact = withLookups(c, impact, plan, tableSet, scans);
    }
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
        covers = evaluator.covers(ContinuousEvaluator.Query.of(definition));
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
              + " is read by the query but not published to the continuous pipeline: its changes would not be seen");
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

  /**
   * Plan nodes after which a result row still depends only on rows of the key's source table that
   * carry its key: scans, joins, sorts, grouping, subquery scans. Not: DISTINCT (Unique: which row
   * of a group survives depends on other rows), set operations and recursive unions, CTE, function,
   * VALUES and sample scans, set-returning functions in the select list, foreign and custom scans.
   */
  private static final Set<String> DELTA_NODES =
      Set.of(
          "Seq Scan",
          "Index Scan",
          "Index Only Scan",
          "Bitmap Heap Scan",
          "Bitmap Index Scan",
          "BitmapAnd",
          "BitmapOr",
          "Tid Scan",
          "Tid Range Scan",
          "Nested Loop",
          "Hash Join",
          "Merge Join",
          "Hash",
          "Sort",
          "Incremental Sort",
          "Materialize",
          "Memoize",
          "Aggregate",
          "Group",
          "Result",
          "Subquery Scan",
          "Gather",
          "Gather Merge");

  /**
   * The clock in a plan (now(), CURRENT_DATE, 'now'::timestamp, ...): rows age in or out of such a
   * query without any transaction, and a scoped delta would judge its keys at another moment than
   * the rows it keeps. Such a query is maintained by full reads only.
   */
  private static final Pattern TIME_DEPENDENT =
      Pattern.compile(
          "(?i)\\bnow\\(|statement_timestamp|transaction_timestamp|clock_timestamp|timeofday|\\bcurrent_(date|time|timestamp)\\b"
              + "|\\blocaltime|'(now|today|tomorrow|yesterday)'");

  /**
   * The impact plan: the key columns are all plain columns of one published table T (PostgreSQL
   * reports each result column's origin), T is scanned exactly once (no self-join, no subquery or
   * policy reading it again: a change of a T row then reaches only result rows carrying that row's
   * key) and every plan node is one of {@link #DELTA_NODES}. Then a change of T affects exactly the
   * result keys of its old and new row; any other table has no rule (its changes cost a full read).
   * Null when any condition fails: the session is maintained by full reads only.
   */
  private static Definition.Impact impact(
      Connection c,
      List<String> keyColumns,
      List<String> columns,
      List<String[]> origins,
      List<String> tableSet,
      Map<String, Integer> scans,
      Set<String> nodeTypes,
      JsonNode plan,
      String planText)
      throws SQLException {
    if (tableSet == null
        || !DELTA_NODES.containsAll(nodeTypes)
        || TIME_DEPENDENT.matcher(planText).find()) {
      return null;
    }
    String table = null;
    List<String> sources = new ArrayList<>();
    for (String k : keyColumns) {
      String[] origin = origins.get(columns.indexOf(k));
      if (origin == null || origin[0] == null || origin[2] == null || origin[2].isEmpty()) {
        return null;
      }
      String t = origin[0] + "." + origin[1];
      if (table != null && !table.equals(t)) {
        return null;
      }
      table = t;
      sources.add(origin[2]);
    }
    if (table == null || !tableSet.contains(table) || scans.getOrDefault(table, 0) != 1) {
      return null;
    }
    if (nullable(plan, table)) {
      // A result row null-extended on T's side has no T row (its key is null): it comes and goes
      // with
      // rows of other tables, which no key of T names.
      return null;
    }
    List<String> types = new ArrayList<>();
    for (String column : sources) {
      String type = columnType(c, table, column);
      if (type == null) {
        return null;
      }
      types.add(type);
    }
    try {
      types.forEach(Definition::castType);
    } catch (IllegalStateException e) {
      return null;
    }
    return new Definition.Impact(table, sources, types);
  }

  private static final Set<String> INTEGER_TYPES = Set.of("smallint", "integer", "bigint");

  /** An identifier in EXPLAIN VERBOSE's text, plain or quoted. */
  private static final String IDENT = "(?:\"(?:[^\"]|\"\")+\"|[A-Za-z_][A-Za-z0-9_$]*)";

  /** A column or whole-row reference in EXPLAIN VERBOSE's text: alias.column or alias.*. */
  private static final Pattern COLUMN_REF =
      Pattern.compile(
          "(?<![A-Za-z0-9_$.\"])(" + IDENT + ")\\.(" + IDENT + "|\\*)(?![A-Za-z0-9_$\"(])");

  /**
   * Lookup rules for the other tables of the set (docs/continuous.md, "Lookup rules"). A table J
   * gets one when the key table T and J each appear once in the plan under their own alias, the
   * plan has no subplan, every condition of the plan that names J names at most J and T, every one
   * that names both holds (outside string literals) no {@code OR} and an equality of a plain T
   * column and a plain J column ({@code t.x = j.y}), both of an integer type, and T's key columns
   * are integers too. Then a J row can reach a result row only through T rows with {@code x} equal
   * to its {@code y}: a J change affects the result keys of the T rows with {@code x} in its old
   * and new {@code y}. Any doubt leaves J without a rule (its changes cost a full read).
   */
  private static Definition.Impact withLookups(
      Connection c,
      Definition.Impact impact,
      JsonNode plan,
      List<String> tableSet,
      Map<String, Integer> scans)
      throws SQLException {
    if (tableSet == null
        || tableSet.size() < 2
        || !impact.castTypes().stream().allMatch(INTEGER_TYPES::contains)
        || impact.table().indexOf('.') != impact.table().lastIndexOf('.')) {
      return impact;
    }
    Map<String, String> aliases = new HashMap<>(); // alias -> schema.table
    List<String> conditions = new ArrayList<>();
    boolean[] subplan = new boolean[1];
    planParts(plan, aliases, conditions, subplan);
    if (subplan[0] || aliases.containsValue(null)) {
      return impact;
    }
    String keyAlias = aliasOf(aliases, impact.table());
    if (keyAlias == null) {
      return impact;
    }
    List<Definition.Lookup> lookups = new ArrayList<>();
    for (String j : tableSet) {
      if (j.equals(impact.table())
          || scans.getOrDefault(j, 0) != 1
          || j.indexOf('.') != j.lastIndexOf('.')) {
        continue;
      }
      String alias = aliasOf(aliases, j);
      if (alias == null) {
        continue;
      }
      String[] pair = linkingEquality(conditions, aliases, keyAlias, alias);
      if (pair == null) {
        continue;
      }
      String keyType = columnType(c, impact.table(), pair[0]);
      String joinType = columnType(c, j, pair[1]);
      if (keyType == null
          || joinType == null
          || !INTEGER_TYPES.contains(keyType)
          || !INTEGER_TYPES.contains(joinType)) {
        continue;
      }
      lookups.add(new Definition.Lookup(j, pair[1], pair[0], keyType));
    }
    return lookups.isEmpty()
        ? impact
        : new Definition.Impact(
            impact.table(), impact.sourceColumns(), impact.castTypes(), lookups);
  }

  /** The one alias of {@code table} in the plan, or null (none, or more than one). */
  private static String aliasOf(Map<String, String> aliases, String table) {
    String found = null;
    for (Map.Entry<String, String> e : aliases.entrySet()) {
      if (e.getValue().equals(table)) {
        if (found != null) {
          return null;
        }
        found = e.getKey();
      }
    }
    return found;
  }

  /**
   * {@code [T column, J column]} of an equality linking J to T, or null when some condition names J
   * with a third alias, a condition naming both has no such equality or has an OR, or none names
   * both.
   */
  private static String[] linkingEquality(
      List<String> conditions, Map<String, String> aliases, String keyAlias, String alias) {
    String[] pair = null;
    for (String raw : conditions) {
      String cond = withoutLiterals(raw);
      if (cond == null) {
        return null; // unbalanced quotes: not understood
      }
      Set<String> named = new HashSet<>();
      Matcher m = COLUMN_REF.matcher(cond);
      while (m.find()) {
        String qualifier = unquote(m.group(1));
        if (aliases.containsKey(qualifier)) {
          named.add(qualifier);
        }
      }
      if (!named.contains(alias)) {
        continue;
      }
      named.remove(alias);
      if (named.isEmpty()) {
        continue; // a condition on J alone
      }
      if (!named.equals(Set.of(keyAlias))) {
        return null;
      }
      // The equality must be one of the condition's top-level AND terms, exactly t.x = j.y: inside
      // anything else (IS NOT TRUE, COALESCE, CASE, a comparison of booleans, an OR) it does not
      // restrict which rows match.
      String[] found = null;
      List<String> terms = conjuncts(cond);
      if (terms == null) {
        return null;
      }
      for (String term : terms) {
        found = found != null ? found : equality(term, keyAlias, alias);
      }
      if (found == null) {
        return null;
      }
      pair = pair == null ? found : pair;
    }
    return pair;
  }

  /**
   * {@code cond} with every string literal replaced by {@code ''}, scanning quoted identifiers as
   * such (a quote character inside one starts no literal); null when a quote is not closed.
   */
  static String withoutLiterals(String cond) {
    StringBuilder out = new StringBuilder(cond.length());
    int i = 0;
    while (i < cond.length()) {
      char ch = cond.charAt(i);
      if (ch == '"' || ch == '\'') {
        int end = i + 1;
        while (true) {
          if (end >= cond.length()) {
            return null;
          }
          if (cond.charAt(end) == ch) {
            if (end + 1 < cond.length() && cond.charAt(end + 1) == ch) {
              end += 2; // a doubled quote inside
              continue;
            }
            break;
          }
          end++;
        }
        out.append(ch == '"' ? cond.substring(i, end + 1) : "''");
        i = end + 1;
      } else {
        out.append(ch);
        i++;
      }
    }
    return out.toString();
  }

  /**
   * The top-level AND terms of a condition without literals, each without its enclosing
   * parentheses; null when an OR appears outside quoted identifiers or parentheses do not balance.
   */
  static List<String> conjuncts(String cond) {
    String c = unwrap(cond.trim());
    if (c == null) {
      return null;
    }
    List<String> terms = new ArrayList<>();
    int depth = 0;
    int start = 0;
    boolean quoted = false;
    for (int i = 0; i < c.length(); i++) {
      char ch = c.charAt(i);
      if (ch == '"') {
        quoted = !quoted;
      } else if (!quoted && ch == '(') {
        depth++;
      } else if (!quoted && ch == ')') {
        depth--;
        if (depth < 0) {
          return null;
        }
      } else if (!quoted && depth == 0 && c.startsWith(" AND ", i)) {
        terms.add(c.substring(start, i));
        start = i + 5;
        i += 4;
      } else if (!quoted && (c.startsWith(" OR ", i) || c.startsWith(" or ", i))) {
        return null;
      }
    }
    if (depth != 0 || quoted) {
      return null;
    }
    terms.add(c.substring(start));
    List<String> out = new ArrayList<>();
    for (String t : terms) {
      String u = unwrap(t.trim());
      if (u == null) {
        return null;
      }
      out.add(u);
    }
    return out;
  }

  /** {@code s} without parentheses that enclose all of it (repeatedly); null when unbalanced. */
  private static String unwrap(String s) {
    while (s.startsWith("(")) {
      int close = closing(s);
      if (close < 0) {
        return null;
      }
      if (close != s.length() - 1) {
        return s;
      }
      s = s.substring(1, close).trim();
    }
    return s;
  }

  /**
   * The index of the parenthesis closing the one {@code s} starts with (quoted identifiers
   * skipped), or -1.
   */
  private static int closing(String s) {
    int depth = 0;
    boolean quoted = false;
    for (int i = 0; i < s.length(); i++) {
      char ch = s.charAt(i);
      if (ch == '"') {
        quoted = !quoted;
      } else if (!quoted && ch == '(') {
        depth++;
      } else if (!quoted && ch == ')' && --depth == 0) {
        return i;
      }
    }
    return -1;
  }

  /**
   * {@code [T column, J column]} when {@code term} is exactly {@code t.x = j.y} (either order),
   * else null.
   */
  private static String[] equality(String term, String keyAlias, String alias) {
    String t = Pattern.quote(quoteIfNeeded(keyAlias));
    String j = Pattern.quote(quoteIfNeeded(alias));
    Matcher a =
        Pattern.compile(t + "\\.(" + IDENT + ") = " + j + "\\.(" + IDENT + ")").matcher(term);
    if (a.matches()) {
      return new String[] {unquote(a.group(1)), unquote(a.group(2))};
    }
    Matcher b =
        Pattern.compile(j + "\\.(" + IDENT + ") = " + t + "\\.(" + IDENT + ")").matcher(term);
    if (b.matches()) {
      return new String[] {unquote(b.group(2)), unquote(b.group(1))};
    }
    return null;
  }

  private static String unquote(String ident) {
    return ident.startsWith("\"")
        ? ident.substring(1, ident.length() - 1).replace("\"\"", "\"")
        : ident;
  }

  /** An alias as EXPLAIN prints it: quoted unless a plain lower-case identifier. */
  private static String quoteIfNeeded(String alias) {
    return alias.matches("[a-z_][a-z0-9_$]*") ? alias : "\"" + alias.replace("\"", "\"\"") + "\"";
  }

  /** {@code format_type} of a column, or null. */
  private static String columnType(Connection c, String table, String column) throws SQLException {
    int dot = table.indexOf('.');
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
                + " JOIN pg_class t ON t.oid = a.attrelid JOIN pg_namespace n ON n.oid = t.relnamespace"
                + " WHERE n.nspname = ? AND t.relname = ? AND a.attname = ? AND a.attnum > 0 AND NOT a.attisdropped")) {
      ps.setString(1, table.substring(0, dot));
      ps.setString(2, table.substring(dot + 1));
      ps.setString(3, column);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getString(1) : null;
      }
    }
  }

  /**
   * Collects a plan's scan aliases (alias -> schema.table; a null value marks an alias used twice),
   * every condition text (keys ending in {@code Cond} or {@code Filter}) and whether any node is a
   * subplan or init plan.
   */
  private static void planParts(
      JsonNode node, Map<String, String> aliases, List<String> conditions, boolean[] subplan) {
    if (node.isObject()) {
      JsonNode rel = node.get("Relation Name");
      JsonNode alias = node.get("Alias");
      if (rel != null && rel.isTextual() && alias != null && alias.isTextual()) {
        JsonNode schema = node.get("Schema");
        String table =
            (schema != null && schema.isTextual() ? schema.textValue() : "public")
                + "."
                + rel.textValue();
        aliases.put(alias.textValue(), aliases.containsKey(alias.textValue()) ? null : table);
      }
      JsonNode parent = node.get("Parent Relationship");
      if (parent != null
          && parent.isTextual()
          && (parent.textValue().equals("SubPlan") || parent.textValue().equals("InitPlan"))) {
        subplan[0] = true;
      }
      if (node.has("Subplan Name")) {
        subplan[0] = true;
      }
      node.fields()
          .forEachRemaining(
              e -> {
                if ((e.getKey().endsWith("Cond") || e.getKey().endsWith("Filter"))
                    && e.getValue().isTextual()) {
                  conditions.add(e.getValue().textValue());
                } else {
                  planParts(e.getValue(), aliases, conditions, subplan);
                }
              });
    } else if (node.isArray()) {
      node.forEach(n -> planParts(n, aliases, conditions, subplan));
    }
  }

  /**
   * Whether a scan of {@code table} is on a nullable side of an outer join somewhere in the plan:
   * the inner child of a left join, the outer child of a right join, either child of a full join.
   */
  static boolean nullable(JsonNode node, String table) {
    if (node.isArray()) {
      for (JsonNode n : node) {
        if (nullable(n, table)) {
          return true;
        }
      }
      return false;
    }
    if (!node.isObject()) {
      return false;
    }
    JsonNode joinType = node.get("Join Type");
    JsonNode children = node.get("Plans");
    if (joinType != null && joinType.isTextual() && children != null && children.isArray()) {
      String type = joinType.textValue();
      for (JsonNode child : children) {
        String side = child.path("Parent Relationship").asText("");
        boolean nullableSide =
            type.equals("Full")
                || (type.equals("Left") && side.equals("Inner"))
                || (type.equals("Right") && side.equals("Outer"));
        if (nullableSide && scansTable(child, table)) {
          return true;
        }
      }
    }
    for (Iterator<JsonNode> it = node.elements(); it.hasNext(); ) {
      if (nullable(it.next(), table)) {
        return true;
      }
    }
    return false;
  }

  private static boolean scansTable(JsonNode node, String table) {
    Map<String, Integer> found = new TreeMap<>();
    scans(node, found, new TreeSet<>());
    return found.containsKey(table);
  }

  /**
   * Counts the scans of each relation (schema.table) and collects the node types of a plan's JSON.
   */
  private static void scans(JsonNode node, Map<String, Integer> scans, Set<String> nodeTypes) {
    if (node.isObject()) {
      JsonNode type = node.get("Node Type");
      if (type != null && type.isTextual()) {
        nodeTypes.add(type.textValue());
      }
      JsonNode rel = node.get("Relation Name");
      JsonNode schema = node.get("Schema");
      if (rel != null && rel.isTextual()) {
        scans.merge(
            (schema != null && schema.isTextual() ? schema.textValue() : "public")
                + "."
                + rel.textValue(),
            1,
            Integer::sum);
      }
      node.fields().forEachRemaining(e -> scans(e.getValue(), scans, nodeTypes));
    } else if (node.isArray()) {
      node.forEach(n -> scans(n, scans, nodeTypes));
    }
  }

  /** Collects relation names (schema.table) and called function names from a plan's JSON. */
  private static void walk(JsonNode node, Set<String> tables, Set<String> calls) {
    if (node.isObject()) {
      JsonNode rel = node.get("Relation Name");
      JsonNode schema = node.get("Schema");
      if (rel != null && rel.isTextual()) {
        tables.add(
            (schema != null && schema.isTextual() ? schema.textValue() : "public")
                + "."
                + rel.textValue());
      }
      node.fields().forEachRemaining(e -> walk(e.getValue(), tables, calls));
    } else if (node.isArray()) {
      node.forEach(n -> walk(n, tables, calls));
    } else if (node.isTextual()) {
      Matcher m = CALL.matcher(node.textValue());
      while (m.find()) {
        calls.add(m.group(1).toLowerCase(Locale.ROOT));
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
      new TreeSet<String>(iterable(node.fieldNames()))
          .forEach(k -> out.set(k, sortKeys(node.get(k))));
      return out;
    }
    if (node.isArray()) {
      ArrayNode out = CANONICAL.createArrayNode();
      node.forEach(n -> out.add(sortKeys(n)));
      return out;
    }
    return node;
  }

  private static <T> List<T> iterable(Iterator<T> it) {
    List<T> out = new ArrayList<>();
    it.forEachRemaining(out::add);
    return out;
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
