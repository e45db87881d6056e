package io.weir.node.continuous;

import com.fasterxml.jackson.databind.JsonNode;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The impact plan of a registered query, from PostgreSQL's own description of it (ADR 0019): which
 * table's changed rows give the affected result keys, by which key columns, with which lookup rules
 * for joined tables, and whether the plan's nodes let one row's result depend only on rows carrying
 * its key. Reads the plan ({@code EXPLAIN (VERBOSE, FORMAT JSON)}) and column types; never parses
 * SQL beyond the join conditions PostgreSQL prints.
 */
final class ImpactPlan {
  private ImpactPlan() {}

  static final Pattern CALL = Pattern.compile("([A-Za-z_][A-Za-z0-9_]*)\\(");

  /**
   * Plan nodes after which a result row still depends only on rows of the key's source table that
   * carry its key: scans, joins, sorts, grouping, subquery scans. Not: DISTINCT (Unique: which row
   * of a group survives depends on other rows), set operations and recursive unions, CTE, function,
   * VALUES and sample scans, set-returning functions in the select list, foreign and custom scans.
   */
  static final Set<String> DELTA_NODES =
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
  static final Pattern TIME_DEPENDENT =
      Pattern.compile(
          "(?i)\\bnow\\(|statement_timestamp|transaction_timestamp|clock_timestamp|timeofday|\\bcurrent_(date|time|timestamp)\\b"
              + "|\\blocaltime|'(now|today|tomorrow|yesterday)'");

  /**
   * The whole impact rule of a plan: {@link #impact}, then the lookups of joined tables ({@link
   * #withLookups}) and the sources of the ORDER BY columns ({@link #withOrderSources}); null when
   * the plan gets no rule. Registration and re-planning both build their rule here, so the two can
   * never build different ones.
   */
  static Definition.Impact rule(
      Connection c,
      List<String> keyColumns,
      List<Definition.OrderColumn> orderBy,
      List<String> columns,
      List<String[]> origins,
      List<String> tableSet,
      Map<String, Integer> scans,
      Set<String> nodeTypes,
      JsonNode plan)
      throws SQLException {
    Definition.Impact impact =
        impact(c, keyColumns, columns, origins, tableSet, scans, nodeTypes, plan, plan.toString());
    if (impact == null) {
      return null;
    }
    impact = withLookups(c, impact, plan, tableSet, scans);
    return withOrderSources(impact, orderBy, columns, origins, nodeTypes);
  }

  /**
   * The impact plan: the key columns are all plain columns of one published table T (PostgreSQL
   * reports each result column's origin), T is scanned exactly once (no self-join, no subquery or
   * policy reading it again: a change of a T row then reaches only result rows carrying that row's
   * key) and every plan node is one of {@link #DELTA_NODES}. Then a change of T affects exactly the
   * result keys of its old and new row; any other table has no rule (its changes cost a full read).
   * Null when any condition fails: the session is maintained by full reads only.
   */
  static Definition.Impact impact(
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

  static final Set<String> INTEGER_TYPES = Set.of("smallint", "integer", "bigint");

  /** An identifier in EXPLAIN VERBOSE's text, plain or quoted. */
  static final String IDENT = "(?:\"(?:[^\"]|\"\")+\"|[A-Za-z_][A-Za-z0-9_$]*)";

  /** A column or whole-row reference in EXPLAIN VERBOSE's text: alias.column or alias.*. */
  static final Pattern COLUMN_REF =
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
  static Definition.Impact withLookups(
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
            impact.table(),
            impact.sourceColumns(),
            impact.castTypes(),
            lookups,
            impact.orderSources());
  }

  /**
   * {@code impact} with the table column each ORDER BY column is a plain reference to, when every
   * one is a column of the impact's table (by the origin PostgreSQL reports for the result column)
   * and the plan groups nothing (each result row is then one row of that table); else {@code
   * impact} unchanged.
   */
  static Definition.Impact withOrderSources(
      Definition.Impact impact,
      List<Definition.OrderColumn> orderBy,
      List<String> columns,
      List<String[]> origins,
      Set<String> nodeTypes) {
    if (nodeTypes.contains("Aggregate") || nodeTypes.contains("Group")) {
      // A grouped row's values come from all the rows of its group (and HAVING may let a group in
      // because another of its rows changed): a change's tuple does not carry the row's values.
      return impact;
    }
    List<String> sources = new ArrayList<>();
    for (Definition.OrderColumn o : orderBy) {
      int i = columns.indexOf(o.column());
      String[] origin = i < 0 ? null : origins.get(i);
      if (origin == null
          || origin[0] == null
          || origin[2] == null
          || origin[2].isEmpty()
          || !impact.table().equals(origin[0] + "." + origin[1])) {
        return impact;
      }
      sources.add(origin[2]);
    }
    return sources.isEmpty() ? impact : impact.withOrderSources(sources);
  }

  /** The one alias of {@code table} in the plan, or null (none, or more than one). */
  static String aliasOf(Map<String, String> aliases, String table) {
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
  static String[] linkingEquality(
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
  static String unwrap(String s) {
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
  static int closing(String s) {
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
  static String[] equality(String term, String keyAlias, String alias) {
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

  static String unquote(String ident) {
    return ident.startsWith("\"")
        ? ident.substring(1, ident.length() - 1).replace("\"\"", "\"")
        : ident;
  }

  /** An alias as EXPLAIN prints it: quoted unless a plain lower-case identifier. */
  static String quoteIfNeeded(String alias) {
    return alias.matches("[a-z_][a-z0-9_$]*") ? alias : "\"" + alias.replace("\"", "\"\"") + "\"";
  }

  /** {@code format_type} of a column, or null. */
  static String columnType(Connection c, String table, String column) throws SQLException {
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
  static void planParts(
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

  static boolean scansTable(JsonNode node, String table) {
    Map<String, Integer> found = new TreeMap<>();
    scans(node, found, new TreeSet<>());
    return found.containsKey(table);
  }

  /**
   * Counts the scans of each relation (schema.table) and collects the node types of a plan's JSON.
   */
  static void scans(JsonNode node, Map<String, Integer> scans, Set<String> nodeTypes) {
    if (node.isObject()) {
      JsonNode type = node.get("Node Type");
      if (type != null && type.isTextual()) {
        nodeTypes.add(type.textValue());
      }
      if (node.has("Grouping Sets")) {
        // GROUPING SETS, ROLLUP, CUBE: an Aggregate whose total rows (null keys) sum up rows of
        // every key, so a change reaches result rows other than its own key's.
        nodeTypes.add("Grouping Sets");
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
  static void walk(JsonNode node, Set<String> tables, Set<String> calls) {
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
}
