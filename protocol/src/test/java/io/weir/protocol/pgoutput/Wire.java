package io.weir.protocol.pgoutput;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/** Builds pgoutput messages byte by byte for tests, big-endian like the server. */
final class Wire {

  private final ByteArrayOutputStream out = new ByteArrayOutputStream();

  static Wire message(char type) {
    return new Wire().int8(type);
  }

  static Wire empty() {
    return new Wire();
  }

  Wire int8(int value) {
    out.write(value);
    return this;
  }

  Wire int16(int value) {
    return int8(value >>> 8).int8(value);
  }

  Wire int32(int value) {
    return int16(value >>> 16).int16(value);
  }

  Wire uint32(long value) {
    return int32((int) value);
  }

  Wire int64(long value) {
    return int32((int) (value >>> 32)).int32((int) value);
  }

  /** A zero-terminated UTF-8 string. */
  Wire string(String value) {
    return bytes(value.getBytes(StandardCharsets.UTF_8)).int8(0);
  }

  Wire bytes(byte[] value) {
    out.writeBytes(value);
    return this;
  }

  /** A tuple column of kind {@code 't'} holding {@code value}'s UTF-8 bytes. */
  Wire textColumn(String value) {
    byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
    return int8('t').int32(bytes.length).bytes(bytes);
  }

  byte[] build() {
    return out.toByteArray();
  }
}
