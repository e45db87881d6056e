package io.weir.node.continuous;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * Reads the row changes PostgreSQL's {@code test_decoding} plugin prints ({@code table public.t:
 * UPDATE: old-key: id[integer]:1 new-tuple: id[integer]:1 name[text]:'a'}): integers and text,
 * {@code null}, quoted literals with doubled quotes. For tests that compare Weir with the order the
 * server itself decoded.
 */
final class TestDecoding {
  private TestDecoding() {}

  /**
   * A row change: the old row or key ({@code before}, null for an insert or an update that kept its
   * key) and the new row ({@code after}, null for a delete).
   */
  record Change(String table, Map<String, Object> before, Map<String, Object> after) {}

  /** The change {@code line} prints, or null when it is of a table not in {@code tables}. */
  static Change parse(String line, Set<String> tables) {
    int colon = line.indexOf(": ");
    String table = line.substring("table ".length(), colon);
    if (!tables.contains(table)) {
      return null;
    }
    String rest = line.substring(colon + 2);
    int actionEnd = rest.indexOf(':');
    String action = rest.substring(0, actionEnd);
    Map<String, Object> before = null;
    Map<String, Object> after = null;
    Map<String, Object> target = new LinkedHashMap<>();
    if (action.equals("DELETE")) {
      before = target;
    } else {
      after = target;
    }
    int i = actionEnd + 1;
    while (i < rest.length()) {
      if (rest.charAt(i) == ' ') {
        i++;
        continue;
      }
      if (rest.startsWith("old-key:", i)) {
        before = new LinkedHashMap<>();
        target = before;
        i += "old-key:".length();
        continue;
      }
      if (rest.startsWith("new-tuple:", i)) {
        after = new LinkedHashMap<>();
        target = after;
        i += "new-tuple:".length();
        continue;
      }
      if (rest.startsWith("(no-tuple-data)", i)) {
        throw new IllegalArgumentException("a change without tuple data: " + action);
      }
      int open = rest.indexOf('[', i);
      int close = rest.indexOf("]:", open);
      String column = rest.substring(i, open);
      String type = rest.substring(open + 1, close);
      i = close + 2;
      Object value;
      if (rest.charAt(i) == '\'') {
        StringBuilder text = new StringBuilder();
        i++;
        while (true) {
          char ch = rest.charAt(i);
          if (ch == '\'') {
            if (i + 1 < rest.length() && rest.charAt(i + 1) == '\'') {
              text.append('\'');
              i += 2;
              continue;
            }
            i++;
            break;
          }
          text.append(ch);
          i++;
        }
        value = text.toString();
      } else {
        int end = rest.indexOf(' ', i);
        String token = rest.substring(i, end < 0 ? rest.length() : end);
        i = end < 0 ? rest.length() : end;
        if (token.equals("null")) {
          value = null;
        } else if (type.equals("integer") || type.equals("bigint") || type.equals("smallint")) {
          value = Long.valueOf(token).intValue();
        } else {
          throw new IllegalArgumentException("a value of type " + type + " not read here");
        }
      }
      target.put(column, value);
    }
    return new Change(table, before, after);
  }
}
