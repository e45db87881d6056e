package io.weir.protocol.pgoutput;

import io.weir.protocol.Lsn;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * A pgoutput capture from {@code src/test/resources/pgoutput}: the messages of one peek at a
 * replication slot, in order. {@code capture.sh} there says how the files were made.
 */
record Fixture(String name, List<Line> lines) {

  /** Every fixture file, for tests that run over all of them. */
  static final List<String> ALL =
      List.of(
          "basic-v1.txt",
          "basic-v1-kolkata.txt",
          "basic-v1-binary.txt",
          "stream-v2.txt",
          "twophase-v3.txt");

  /** One captured message: the LSN the slot reported for it and its bytes. */
  record Line(Lsn lsn, byte[] bytes) {}

  static Fixture load(String name) {
    String resource = "/pgoutput/" + name;
    try (InputStream in = Fixture.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException("missing test resource " + resource);
      }
      BufferedReader reader =
          new BufferedReader(new InputStreamReader(in, StandardCharsets.US_ASCII));
      List<Line> lines = new ArrayList<>();
      String text;
      while ((text = reader.readLine()) != null) {
        if (text.isBlank() || text.startsWith("#")) {
          continue;
        }
        String[] fields = text.split(" ");
        lines.add(new Line(Lsn.parse(fields[0]), HexFormat.of().parseHex(fields[1])));
      }
      return new Fixture(name, List.copyOf(lines));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Decodes every line in order with one decoder, as a replication connection would. */
  List<PgOutputMessage> decodeAll() {
    PgOutputDecoder decoder = new PgOutputDecoder();
    return lines.stream().map(line -> decoder.decode(line.bytes())).toList();
  }
}
