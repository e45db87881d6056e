package io.weir.node.continuous;

import io.weir.protocol.ErrorCode;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The lexical check and rewrite of a continuous query's base SQL, before PostgreSQL sees it. It
 * walks the text once, skipping string literals (standard, {@code E'...'} and dollar-quoted),
 * quoted identifiers and comments, and:
 *
 * <ul>
 *   <li>refuses more than one statement (any {@code ;}), a first word other than {@code SELECT} or
 *       {@code WITH}, positional parameters ({@code $1}), {@code LIMIT}, {@code OFFSET}, {@code
 *       FETCH}, windows ({@code OVER}, {@code WINDOW}), data-changing words ({@code INSERT}, {@code
 *       UPDATE}, {@code DELETE}, {@code MERGE}, {@code INTO}), {@code SET} outside a recursive
 *       CTE's {@code SEARCH}/{@code CYCLE} clause, row locks ({@code FOR UPDATE|SHARE|NO KEY|KEY}),
 *       an {@code E''} string continued on another line, and calls of {@code set_config}, {@code
 *       pg_*}, {@code dblink*}, {@code lo_*} functions and others that reach outside the query or
 *       run SQL from text ({@link #forbiddenFunction}), also when the name is quoted or a comment
 *       stands before its parenthesis;
 *   <li>replaces each named parameter {@code :name} by a JDBC placeholder (and a literal {@code ?}
 *       operator by pgjdbc's escape {@code ??}), recording the names in order;
 *   <li>collects the names of functions called (a word before {@code (}) for the table-set check,
 *       and a normalised text (comments dropped, whitespace collapsed) for the plan fingerprint.
 * </ul>
 *
 * PostgreSQL then parses and plans the rewritten statement in a read-only transaction: this class
 * is the allow-list in front of it, not a parser. Error messages name the construct, never text
 * from the query.
 */
public final class ContinuousSql {
  /** Words refused anywhere outside literals and comments. */
  static final Set<String> FORBIDDEN_WORDS =
      Set.of(
          "limit", "offset", "fetch", "over", "window", "insert", "update", "delete", "merge",
          "into");

  /** Functions refused besides every {@code pg_*} one. */
  static final Set<String> FORBIDDEN_FUNCTIONS =
      Set.of(
          "set_config",
          "nextval",
          "setval",
          "currval",
          "lastval",
          "txid_current",
          "txid_current_if_assigned",
          "query_to_xml",
          "query_to_xmlschema",
          "query_to_xml_and_xmlschema",
          "cursor_to_xml",
          "cursor_to_xmlschema",
          "table_to_xml",
          "table_to_xmlschema",
          "table_to_xml_and_xmlschema",
          "schema_to_xml",
          "schema_to_xmlschema",
          "schema_to_xml_and_xmlschema",
          "database_to_xml",
          "database_to_xmlschema",
          "database_to_xml_and_xmlschema",
          "ts_stat",
          "ts_rewrite",
          "current_setting");

  /**
   * Prefixes of refused function names: PostgreSQL's administrative functions, dblink, large
   * objects.
   */
  static final List<String> FORBIDDEN_PREFIXES = List.of("pg_", "dblink", "lo_");

  /**
   * Whether a function of this name is refused in a continuous query. Checked on the text and again
   * on every name the plan calls ({@code Registrar}), which sees through quoting, comments and
   * string tricks.
   */
  public static boolean forbiddenFunction(String name) {
    String n = name.toLowerCase(Locale.ROOT);
    int dot = n.lastIndexOf('.');
    if (dot >= 0) {
      n = n.substring(dot + 1);
    }
    if (FORBIDDEN_FUNCTIONS.contains(n)) {
      return true;
    }
    for (String prefix : FORBIDDEN_PREFIXES) {
      if (n.startsWith(prefix)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether a name the plan calls is refused. The plan also shows row-level security policies'
   * expressions, which may call {@code current_setting} or stable {@code pg_*} functions such as
   * {@code pg_has_role}: only the listed functions are refused here ({@code Registrar} refuses
   * volatile ones besides), the prefixes and {@code current_setting} only in the query's text.
   */
  public static boolean forbiddenInPlan(String name) {
    String n = name.toLowerCase(Locale.ROOT);
    int dot = n.lastIndexOf('.');
    if (dot >= 0) {
      n = n.substring(dot + 1);
    }
    return FORBIDDEN_FUNCTIONS.contains(n) && !n.equals("current_setting");
  }

  static ContinuousQueryException forbiddenCall() {
    return refused(
        "the query calls a function that is not allowed in continuous queries (set_config, pg_*, dblink,"
            + " large objects, functions that run SQL from text, and volatile functions)");
  }

  /**
   * The checked statement.
   *
   * @param jdbcSql the text with {@code ?} for each parameter occurrence
   * @param parameterOrder the parameter name of each placeholder, in order (a name may repeat)
   * @param functions lower-cased names of words followed by {@code (}
   * @param normalized comments removed, runs of whitespace as one space: for the fingerprint
   */
  public record Parsed(
      String jdbcSql, List<String> parameterOrder, Set<String> functions, String normalized) {
    public Parsed {
      parameterOrder = List.copyOf(parameterOrder);
      functions = Set.copyOf(functions);
    }

    /** The distinct parameter names. */
    public Set<String> parameterNames() {
      return new LinkedHashSet<>(parameterOrder);
    }
  }

  private ContinuousSql() {}

  public static Parsed parse(String sql) {
    if (sql == null || sql.isBlank()) {
      throw refused("the query is empty");
    }
    StringBuilder jdbc = new StringBuilder(sql.length() + 16);
    StringBuilder norm = new StringBuilder(sql.length());
    List<String> params = new ArrayList<>();
    Set<String> functions = new LinkedHashSet<>();
    List<String> words = new ArrayList<>(); // lower-cased words in order, for context checks
    int n = sql.length();
    int i = 0;
    boolean space = false;
    while (i < n) {
      char c = sql.charAt(i);
      if (Character.isWhitespace(c)) {
        space = true;
        jdbc.append(c);
        i++;
        continue;
      }
      if (c == '-' && i + 1 < n && sql.charAt(i + 1) == '-') {
        int end = sql.indexOf('\n', i);
        end = end < 0 ? n : end;
        jdbc.append(' ');
        space = true;
        i = end;
        continue;
      }
      if (c == '/' && i + 1 < n && sql.charAt(i + 1) == '*') {
        int depth = 0;
        int j = i;
        while (j < n) {
          if (j + 1 < n && sql.charAt(j) == '/' && sql.charAt(j + 1) == '*') {
            depth++;
            j += 2;
          } else if (j + 1 < n && sql.charAt(j) == '*' && sql.charAt(j + 1) == '/') {
            depth--;
            j += 2;
            if (depth == 0) {
              break;
            }
          } else {
            j++;
          }
        }
        if (depth != 0) {
          throw invalid("a block comment is not closed");
        }
        jdbc.append(' ');
        space = true;
        i = j;
        continue;
      }
      if (space && norm.length() > 0) {
        norm.append(' ');
      }
      space = false;
      int start = i;
      if (c == '\'') {
        boolean escapes =
            i > 0
                && (sql.charAt(i - 1) == 'e' || sql.charAt(i - 1) == 'E')
                && (i < 2 || !isWordChar(sql.charAt(i - 2)));
        i = endOfString(sql, i, escapes);
      } else if (c == '"') {
        int j = i + 1;
        while (true) {
          if (j >= n) {
            throw invalid("a quoted identifier is not closed");
          }
          if (sql.charAt(j) == '"') {
            if (j + 1 < n && sql.charAt(j + 1) == '"') {
              j += 2;
              continue;
            }
            break;
          }
          j++;
        }
        i = j + 1;
        // A quoted name before '(' is a function call too.
        int k = skipSpace(sql, i);
        if (k < n && sql.charAt(k) == '(') {
          String name = sql.substring(start + 1, j).replace("\"\"", "\"");
          if (forbiddenFunction(name)) {
            throw forbiddenCall();
          }
          functions.add(name);
        }
        words.add("\"");
      } else if (c == '$') {
        int j = i + 1;
        if (j < n && Character.isDigit(sql.charAt(j))) {
          throw refused(
              "positional parameters ($1) are not accepted; use named parameters (:name)");
        }
        while (j < n && isWordChar(sql.charAt(j)) && sql.charAt(j) != '$') {
          j++;
        }
        if (j >= n || sql.charAt(j) != '$') {
          throw invalid("a dollar sign that starts no dollar-quoted string");
        }
        String tag = sql.substring(i, j + 1);
        int close = sql.indexOf(tag, j + 1);
        if (close < 0) {
          throw invalid("a dollar-quoted string is not closed");
        }
        i = close + tag.length();
      } else if (c == ';') {
        throw refused("one statement only: the query may not contain a semicolon");
      } else if (c == ':' && i + 1 < n && sql.charAt(i + 1) == ':') {
        i += 2;
      } else if (c == ':' && i + 1 < n && isWordStart(sql.charAt(i + 1))) {
        int j = i + 1;
        while (j < n && isWordChar(sql.charAt(j)) && sql.charAt(j) != '$') {
          j++;
        }
        String name = sql.substring(i + 1, j);
        params.add(name);
        jdbc.append('?');
        norm.append(':').append(name);
        i = j;
        continue;
      } else if (c == '?') {
        jdbc.append("??");
        norm.append('?');
        i++;
        continue;
      } else if (isWordStart(c)) {
        int j = i;
        while (j < n && isWordChar(sql.charAt(j))) {
          j++;
        }
        String word = sql.substring(i, j).toLowerCase(Locale.ROOT);
        i = j;
        if (words.isEmpty() && !word.equals("select") && !word.equals("with")) {
          throw refused("the query must be a single SELECT or WITH statement");
        }
        checkWord(word, words);
        int k = skipSpace(sql, i);
        if (k < n && sql.charAt(k) == '(') {
          if (forbiddenFunction(word)) {
            throw forbiddenCall();
          }
          functions.add(word);
        }
        words.add(word);
      } else {
        if (words.isEmpty()) {
          throw refused("the query must be a single SELECT or WITH statement");
        }
        i++;
      }
      jdbc.append(sql, start, i);
      norm.append(sql, start, i);
    }
    if (words.isEmpty()) {
      throw refused("the query must be a single SELECT or WITH statement");
    }
    return new Parsed(jdbc.toString(), params, functions, norm.toString());
  }

  private static void checkWord(String word, List<String> before) {
    if (FORBIDDEN_WORDS.contains(word)) {
      throw refused(
          "the base query may not use "
              + word.toUpperCase(Locale.ROOT)
              + " (no LIMIT, OFFSET, FETCH, window functions, data changes or session commands: Weir applies ORDER BY and the limit)");
    }
    if (word.equals("set")) {
      // SEARCH ... SET col and CYCLE ... SET col of a recursive CTE are the only SET in a query.
      boolean inSearchOrCycle = false;
      for (int k = before.size() - 1; k >= 0 && k >= before.size() - 64; k--) {
        String w = before.get(k);
        if (w.equals("search") || w.equals("cycle")) {
          inSearchOrCycle = true;
          break;
        }
        if (w.equals("select") || w.equals("set")) {
          break;
        }
      }
      if (!inSearchOrCycle) {
        throw refused("the query may not use SET");
      }
    }
    if (!before.isEmpty()
        && before.get(before.size() - 1).equals("for")
        && (word.equals("share") || word.equals("no") || word.equals("key"))) {
      throw refused("the query may not lock rows (FOR UPDATE, FOR SHARE)");
    }
  }

  private static int endOfString(String sql, int i, boolean escapes) {
    int n = sql.length();
    int j = i + 1;
    while (j < n) {
      char c = sql.charAt(j);
      if (escapes && c == '\\') {
        j += 2;
        continue;
      }
      if (c == '\'') {
        if (j + 1 < n && sql.charAt(j + 1) == '\'') {
          j += 2;
          continue;
        }
        if (escapes && continues(sql, j + 1)) {
          // PostgreSQL reads 'a'<newline>'b' as one string, an E'' string's continuation with
          // escapes too; read otherwise here, text inside it would look like SQL. Refused.
          throw refused("a string continued on another line after an E'' string is not accepted");
        }
        return j + 1;
      }
      j++;
    }
    throw invalid("a string literal is not closed");
  }

  /**
   * Whether a quote follows {@code i} after whitespace holding a newline (comments allowed): a
   * string continuation. A newline inside a comment counts too, which only refuses more.
   */
  private static boolean continues(String sql, int i) {
    int k = skipSpace(sql, i);
    return k < sql.length()
        && sql.charAt(k) == '\''
        && sql.substring(i, k).chars().anyMatch(ch -> ch == '\n' || ch == '\r');
  }

  /** The index of the next character after whitespace and comments from {@code i}. */
  private static int skipSpace(String sql, int i) {
    int n = sql.length();
    while (i < n) {
      char c = sql.charAt(i);
      if (Character.isWhitespace(c)) {
        i++;
      } else if (c == '-' && i + 1 < n && sql.charAt(i + 1) == '-') {
        int end = sql.indexOf('\n', i);
        i = end < 0 ? n : end;
      } else if (c == '/' && i + 1 < n && sql.charAt(i + 1) == '*') {
        int end = sql.indexOf("*/", i + 2);
        i = end < 0 ? n : end + 2;
      } else {
        return i;
      }
    }
    return i;
  }

  private static boolean isWordStart(char c) {
    return Character.isLetter(c) || c == '_';
  }

  private static boolean isWordChar(char c) {
    return Character.isLetterOrDigit(c) || c == '_' || c == '$';
  }

  private static ContinuousQueryException refused(String message) {
    return new ContinuousQueryException(ErrorCode.QUERY_NOT_ALLOWED, message);
  }

  private static ContinuousQueryException invalid(String message) {
    return new ContinuousQueryException(ErrorCode.INVALID_QUERY, message);
  }
}
