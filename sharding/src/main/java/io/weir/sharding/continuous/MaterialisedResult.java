package io.weir.sharding.continuous;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A session's materialised result as its replay log spells it, kept by applying each logged event
 * the way a client does: {@code InitialResult} replaces everything; {@code RowRemoved} drops the
 * key; {@code RowAdded} inserts at its position; {@code RowUpdated} replaces the key's row; {@code
 * ResultReordered} gives the whole new order. Keys and rows are kept as the exact JSON text of the
 * events (slices of it, never re-encoded), so the result reads back byte for byte.
 *
 * <p>An event that does not apply (an unknown type, a key that is not there, a position out of
 * range, malformed data) makes the result unknown until the next {@code InitialResult}: never a
 * guess.
 */
public final class MaterialisedResult {
  private static final JsonFactory JSON = ContinuousLogSerializer.JSON;

  private MaterialisedResult() {}

  /** What one event says, as raw JSON slices. */
  private static final class Parsed {
    String type;
    String key;
    String row;
    int position = -1;
    List<ContinuousSession.Row> rows;
    List<String> keys;
    String lsn;
  }

  /**
   * The result the log entries {@code entries} describe, applied in order from nothing; null when
   * not known.
   */
  public static List<ContinuousSession.Row> of(List<ContinuousSession.Entry> entries) {
    ContinuousSession.State state = new ContinuousSession.State(0);
    for (ContinuousSession.Entry e : entries) {
      apply(state, e.type(), e.data());
    }
    return state.result == null ? null : List.copyOf(state.result);
  }

  /**
   * Applies the logged event {@code type}/{@code data} to {@code state}: its result (null when not
   * known afterwards) and the last commit LSN named.
   */
  static void apply(ContinuousSession.State state, String type, String data) {
    Parsed p;
    try {
      p = parse(data);
    } catch (IOException | RuntimeException e) {
      state.result = null;
      return;
    }
    if (p.lsn != null) {
      state.lsn = p.lsn;
    }
    state.result = type.equals(p.type) ? apply(state.result, type, p) : null;
  }

  private static ArrayList<ContinuousSession.Row> apply(
      ArrayList<ContinuousSession.Row> result, String type, Parsed p) {
    switch (type) {
      case "InitialResult":
        return p.rows == null ? null : new ArrayList<>(p.rows);
      case "RowRemoved":
        {
          if (result == null || p.key == null) {
            return null;
          }
          int i = indexOf(result, p.key);
          if (i < 0) {
            return null;
          }
          result.remove(i);
          return result;
        }
      case "RowAdded":
        if (result == null
            || p.key == null
            || p.row == null
            || p.position < 0
            || p.position > result.size()
            || indexOf(result, p.key) >= 0) {
          return null;
        }
        result.add(p.position, new ContinuousSession.Row(p.key, p.row));
        return result;
      case "RowUpdated":
        {
          if (result == null || p.key == null || p.row == null) {
            return null;
          }
          int i = indexOf(result, p.key);
          if (i < 0) {
            return null;
          }
          result.set(i, new ContinuousSession.Row(p.key, p.row));
          return result;
        }
      case "ResultReordered":
        {
          if (result == null || p.keys == null || p.keys.size() != result.size()) {
            return null;
          }
          Map<String, ContinuousSession.Row> byKey = new HashMap<>();
          result.forEach(r -> byKey.put(r.key(), r));
          ArrayList<ContinuousSession.Row> out = new ArrayList<>(result.size());
          for (String k : p.keys) {
            ContinuousSession.Row r = byKey.remove(k);
            if (r == null) {
              return null;
            }
            out.add(r);
          }
          return out;
        }
      default:
        return null;
    }
  }

  private static int indexOf(List<ContinuousSession.Row> result, String key) {
    for (int i = 0; i < result.size(); i++) {
      if (result.get(i).key().equals(key)) {
        return i;
      }
    }
    return -1;
  }

  private static Parsed parse(String data) throws IOException {
    Parsed out = new Parsed();
    try (JsonParser p = JSON.createParser(data)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new IOException("not an object");
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String field = p.getCurrentName();
        JsonToken value = p.nextToken();
        switch (field) {
          case "type" -> out.type = value == JsonToken.VALUE_STRING ? p.getText() : null;
          case "lsn" -> out.lsn = value == JsonToken.VALUE_STRING ? p.getText() : null;
          case "position" ->
              out.position = value == JsonToken.VALUE_NUMBER_INT ? p.getIntValue() : -1;
          case "key" -> out.key = value == JsonToken.START_ARRAY ? slice(p, data) : skip(p);
          case "row" -> out.row = value == JsonToken.START_OBJECT ? slice(p, data) : skip(p);
          case "keys" -> out.keys = value == JsonToken.START_ARRAY ? keys(p, data) : skipList(p);
          case "rows" -> out.rows = value == JsonToken.START_ARRAY ? rows(p, data) : skipRows(p);
          default -> p.skipChildren();
        }
      }
    }
    return out;
  }

  /** The raw text of the container the parser is at (its start token just read). */
  private static String slice(JsonParser p, String data) throws IOException {
    int start = (int) p.getTokenLocation().getCharOffset();
    p.skipChildren();
    int end = (int) p.getCurrentLocation().getCharOffset();
    return data.substring(start, end);
  }

  private static String skip(JsonParser p) throws IOException {
    p.skipChildren();
    return null;
  }

  private static List<String> skipList(JsonParser p) throws IOException {
    p.skipChildren();
    return null;
  }

  private static List<ContinuousSession.Row> skipRows(JsonParser p) throws IOException {
    p.skipChildren();
    return null;
  }

  private static List<String> keys(JsonParser p, String data) throws IOException {
    List<String> keys = new ArrayList<>();
    while (p.nextToken() == JsonToken.START_ARRAY) {
      keys.add(slice(p, data));
    }
    if (p.currentToken() != JsonToken.END_ARRAY) {
      throw new IOException("a key is not an array");
    }
    return keys;
  }

  private static List<ContinuousSession.Row> rows(JsonParser p, String data) throws IOException {
    List<ContinuousSession.Row> rows = new ArrayList<>();
    while (p.nextToken() == JsonToken.START_OBJECT) {
      String key = null;
      String row = null;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String field = p.getCurrentName();
        JsonToken value = p.nextToken();
        if (field.equals("key") && value == JsonToken.START_ARRAY) {
          key = slice(p, data);
        } else if (field.equals("row") && value == JsonToken.START_OBJECT) {
          row = slice(p, data);
        } else {
          p.skipChildren();
        }
      }
      if (key == null || row == null) {
        throw new IOException("a row lacks its key or values");
      }
      rows.add(new ContinuousSession.Row(key, row));
    }
    if (p.currentToken() != JsonToken.END_ARRAY) {
      throw new IOException("a row is not an object");
    }
    return rows;
  }
}
