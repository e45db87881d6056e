package io.weir.persistence.cdc.snapshot;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.pgoutput.TupleData;
import java.io.ByteArrayOutputStream;

/**
 * Parses one row of PostgreSQL's COPY text format (what {@code COPY ... TO STDOUT} sends): columns
 * separated by tabs, {@code \N} for NULL, backslash escapes for backslash and control characters.
 * Values are the type output functions' text, exactly what pgoutput sends in text mode.
 */
final class CopyText {
  private CopyText() {}

  /**
   * @throws PipelineHaltException ({@link HaltReason#PROTOCOL_VIOLATION}) when the row does not
   *     have {@code columns} columns; the message never quotes the row
   */
  static TupleData row(byte[] line, int columns) {
    int end = line.length;
    if (end > 0 && line[end - 1] == '\n') {
      end--;
    }
    int[] starts = new int[columns];
    int[] lengths = new int[columns];
    boolean[] nulls = new boolean[columns];
    boolean escaped = false;
    int column = 0;
    int start = 0;
    for (int i = 0; i <= end; i++) {
      if (i == end || line[i] == '\t') {
        if (column >= columns) {
          throw mismatch(columns);
        }
        starts[column] = start;
        lengths[column] = i - start;
        if (i - start == 2 && line[start] == '\\' && line[start + 1] == 'N') {
          nulls[column] = true;
          lengths[column] = 0;
        }
        column++;
        start = i + 1;
      } else if (line[i] == '\\') {
        escaped = true;
      }
    }
    if (column != columns) {
      throw mismatch(columns);
    }
    if (!escaped) {
      return TupleData.ofTextColumns(line, starts, lengths, nulls); // the common case: no copy
    }
    // Some column has escapes: unescape every column into a new array.
    ByteArrayOutputStream out = new ByteArrayOutputStream(end);
    for (int c = 0; c < columns; c++) {
      int from = starts[c];
      starts[c] = out.size();
      if (!nulls[c]) {
        unescape(line, from, from + lengths[c], out);
      }
      lengths[c] = out.size() - starts[c];
    }
    return TupleData.ofTextColumns(out.toByteArray(), starts, lengths, nulls);
  }

  private static void unescape(byte[] line, int from, int to, ByteArrayOutputStream out) {
    for (int i = from; i < to; i++) {
      byte b = line[i];
      if (b != '\\' || i + 1 >= to) {
        out.write(b);
        continue;
      }
      byte e = line[++i];
      switch (e) {
        case 'b' -> out.write('\b');
        case 'f' -> out.write('\f');
        case 'n' -> out.write('\n');
        case 'r' -> out.write('\r');
        case 't' -> out.write('\t');
        case 'v' -> out.write(0x0B);
        case 'x' -> {
          int v = 0;
          int n = 0;
          while (n < 2 && i + 1 < to && Character.digit(line[i + 1], 16) >= 0) {
            v = v * 16 + Character.digit(line[++i], 16);
            n++;
          }
          out.write(n == 0 ? 'x' : v);
        }
        default -> {
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            int n = 1;
            while (n < 3 && i + 1 < to && line[i + 1] >= '0' && line[i + 1] <= '7') {
              v = v * 8 + (line[++i] - '0');
              n++;
            }
            out.write(v);
          } else {
            out.write(e); // \\ and any other escaped character stand for themselves
          }
        }
      }
    }
  }

  private static PipelineHaltException mismatch(int columns) {
    return new PipelineHaltException(
        HaltReason.PROTOCOL_VIOLATION,
        "a snapshot row did not have the " + columns + " columns the catalog announced");
  }
}
