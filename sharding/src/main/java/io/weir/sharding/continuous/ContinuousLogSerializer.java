package io.weir.sharding.continuous;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.NotSerializableException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The journal encoding of a continuous session's log (ADR 0025): UTF-8 JSON, so the replay log is
 * readable with SQL ({@code convert_from(event_payload, 'UTF8')::jsonb}) as its earlier table was.
 *
 * <ul>
 *   <li>{@link ContinuousSession.Entry}, manifest {@code E}: {@code
 *       {"sequence":n,"type":"...","data":"..."}} ({@code data}, itself JSON, as a string: it reads
 *       back byte for byte);
 *   <li>{@link ContinuousSession.Snapshot}, manifest {@code S}: {@code
 *       {"last":n,"lsn":"...","rows":[["key","row"],...]}} ({@code lsn} and {@code rows} absent
 *       when not known; each row its key's and values' JSON as strings).
 * </ul>
 *
 * Unknown fields are refused, not skipped. Errors name the manifest and the problem, never a value.
 */
public final class ContinuousLogSerializer extends SerializerWithStringManifest {
  public static final int IDENTIFIER = 7_302;
  static final String ENTRY = "E";
  static final String STATE = "S";

  /**
   * Without Jackson's default read limits (20M-character strings, 1,000-digit numbers): a stored
   * entry must always read back.
   */
  static final JsonFactory JSON =
      JsonFactory.builder()
          .streamReadConstraints(
              StreamReadConstraints.builder()
                  .maxStringLength(Integer.MAX_VALUE)
                  .maxNumberLength(Integer.MAX_VALUE)
                  .maxDocumentLength(-1)
                  .build())
          .build();

  public ContinuousLogSerializer(ExtendedActorSystem system) {}

  public ContinuousLogSerializer() {}

  @Override
  public int identifier() {
    return IDENTIFIER;
  }

  @Override
  public String manifest(Object o) {
    if (o instanceof ContinuousSession.Entry) {
      return ENTRY;
    }
    if (o instanceof ContinuousSession.Snapshot) {
      return STATE;
    }
    throw new IllegalArgumentException("not a continuous session event: " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    ByteArrayOutputStream bytes =
        new ByteArrayOutputStream(
            o instanceof ContinuousSession.Entry e ? e.data().length() + 64 : 32);
    try (JsonGenerator g = JSON.createGenerator(bytes)) {
      g.writeStartObject();
      if (o instanceof ContinuousSession.Entry e) {
        g.writeNumberField("sequence", e.sequence());
        g.writeStringField("type", e.type());
        g.writeStringField("data", e.data());
      } else if (o instanceof ContinuousSession.Snapshot s) {
        g.writeNumberField("last", s.last());
        if (s.lsn() != null) {
          g.writeStringField("lsn", s.lsn());
        }
        if (s.rows() != null) {
          g.writeArrayFieldStart("rows");
          for (ContinuousSession.Row r : s.rows()) {
            g.writeStartArray();
            g.writeString(r.key());
            g.writeString(r.row());
            g.writeEndArray();
          }
          g.writeEndArray();
        }
      } else {
        throw new IllegalArgumentException(
            "not a continuous session event: " + o.getClass().getName());
      }
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException("writing a continuous session event failed", e);
    }
    return bytes.toByteArray();
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) throws NotSerializableException {
    if (!ENTRY.equals(manifest) && !STATE.equals(manifest)) {
      throw new NotSerializableException("unknown continuous session manifest " + manifest);
    }
    try (JsonParser p = JSON.createParser(bytes)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new NotSerializableException(
            "continuous session event " + manifest + " is not a JSON object");
      }
      Long sequence = null;
      String type = null;
      String data = null;
      Long last = null;
      String lsn = null;
      List<ContinuousSession.Row> rows = null;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        JsonToken value = p.nextToken();
        switch (manifest + ":" + field) {
          case "E:sequence" -> sequence = number(p, value, field);
          case "E:type" -> type = text(p, value, field);
          case "E:data" -> data = text(p, value, field);
          case "S:last" -> last = number(p, value, field);
          case "S:lsn" -> lsn = text(p, value, field);
          case "S:rows" -> rows = rows(p, value);
          default ->
              throw new NotSerializableException(
                  "continuous session event " + manifest + " has an unknown field");
        }
      }
      if (p.currentToken() != JsonToken.END_OBJECT || p.nextToken() != null) {
        throw new NotSerializableException(
            "continuous session event " + manifest + " has trailing content");
      }
      if (ENTRY.equals(manifest)) {
        if (sequence == null || type == null || data == null) {
          throw new NotSerializableException("continuous session entry lacks a field");
        }
        return new ContinuousSession.Entry(sequence, type, data);
      }
      if (last == null) {
        throw new NotSerializableException("continuous session snapshot lacks its last sequence");
      }
      return new ContinuousSession.Snapshot(last, lsn, rows);
    } catch (IOException | RuntimeException e) {
      if (e instanceof NotSerializableException n) {
        throw n;
      }
      // Truncated or corrupt input: say where, not what (the data holds row values).
      throw new NotSerializableException(
          "corrupt continuous session event "
              + manifest
              + " ("
              + e.getClass().getSimpleName()
              + ")");
    }
  }

  private static List<ContinuousSession.Row> rows(JsonParser p, JsonToken value)
      throws IOException {
    if (value != JsonToken.START_ARRAY) {
      throw new NotSerializableException("continuous session field rows is not an array");
    }
    List<ContinuousSession.Row> rows = new ArrayList<>();
    while (p.nextToken() == JsonToken.START_ARRAY) {
      String key = text(p, p.nextToken(), "rows");
      String row = text(p, p.nextToken(), "rows");
      if (p.nextToken() != JsonToken.END_ARRAY) {
        throw new NotSerializableException("continuous session row is not a pair");
      }
      rows.add(new ContinuousSession.Row(key, row));
    }
    if (p.currentToken() != JsonToken.END_ARRAY) {
      throw new NotSerializableException("continuous session rows are not pairs");
    }
    return rows;
  }

  private static long number(JsonParser p, JsonToken value, String field) throws IOException {
    if (value != JsonToken.VALUE_NUMBER_INT) {
      throw new NotSerializableException(
          "continuous session field " + field + " is not an integer");
    }
    return p.getLongValue();
  }

  private static String text(JsonParser p, JsonToken value, String field) throws IOException {
    if (value != JsonToken.VALUE_STRING) {
      throw new NotSerializableException("continuous session field " + field + " is not a string");
    }
    return p.getText();
  }
}
