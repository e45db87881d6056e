package io.weir.node.cli;

import java.util.ArrayList;
import java.util.List;

/**
 * A plain-text table for terminals: a header row, columns padded to their widest cell and two
 * spaces apart, no trailing spaces. A null cell shows as {@code -}; a column of numbers (and nulls)
 * is right-aligned.
 */
public final class TextTable {
  private final List<String> header;
  private final List<List<String>> rows = new ArrayList<>();
  private final boolean[] numeric;
  private final boolean[] hasText;

  public TextTable(String... header) {
    this.header = List.of(header);
    this.numeric = new boolean[header.length];
    this.hasText = new boolean[header.length];
  }

  /** Adds a row; it must have as many cells as the header. */
  public TextTable row(Object... cells) {
    if (cells.length != header.size()) {
      throw new IllegalArgumentException(
          "a row needs " + header.size() + " cells, not " + cells.length);
    }
    List<String> row = new ArrayList<>(cells.length);
    for (int i = 0; i < cells.length; i++) {
      String text = cells[i] == null ? "-" : cells[i].toString();
      if (cells[i] instanceof Number) {
        numeric[i] = true;
      } else if (cells[i] != null) {
        hasText[i] = true;
      }
      row.add(text.replace('\n', ' ').replace('\r', ' ').replace('\t', ' '));
    }
    rows.add(row);
    return this;
  }

  public int size() {
    return rows.size();
  }

  public String render() {
    int[] width = new int[header.size()];
    for (int i = 0; i < width.length; i++) {
      width[i] = header.get(i).length();
      for (List<String> row : rows) {
        width[i] = Math.max(width[i], row.get(i).length());
      }
    }
    StringBuilder out = new StringBuilder();
    line(out, header, width);
    for (List<String> row : rows) {
      line(out, row, width);
    }
    return out.toString();
  }

  private void line(StringBuilder out, List<String> cells, int[] width) {
    StringBuilder line = new StringBuilder();
    for (int i = 0; i < cells.size(); i++) {
      String cell = cells.get(i);
      int pad = width[i] - cell.length();
      boolean right = numeric[i] && !hasText[i];
      if (i > 0) {
        line.append("  ");
      }
      if (right) {
        line.append(" ".repeat(pad)).append(cell);
      } else {
        line.append(cell).append(" ".repeat(i == cells.size() - 1 ? 0 : pad));
      }
    }
    int end = line.length();
    while (end > 0 && line.charAt(end - 1) == ' ') {
      end--;
    }
    out.append(line, 0, end).append('\n');
  }
}
