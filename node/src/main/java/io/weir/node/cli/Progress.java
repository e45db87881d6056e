package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.PrintWriter;
import java.util.Locale;

/**
 * Progress of a long operation on stderr. On a terminal one line is redrawn in place ({@code \r});
 * otherwise (a log file, a CI job) a line is printed when it changed, at most every {@code
 * quietMillis}, so a long snapshot does not flood the log.
 */
final class Progress {
  private static final int BAR = 20;

  private final PrintWriter err;
  private final boolean terminal;
  private final long quietMillis;
  private String last;
  private long lastPrinted;
  private int drawn;

  Progress(PrintWriter err, boolean terminal, long quietMillis) {
    this.err = err;
    this.terminal = terminal;
    this.quietMillis = quietMillis;
  }

  void update(String line) {
    long now = System.currentTimeMillis();
    if (terminal) {
      draw(line);
    } else if (!line.equals(last) && (last == null || now - lastPrinted >= quietMillis)) {
      err.println(line);
      err.flush();
      lastPrinted = now;
    } else {
      return;
    }
    last = line;
  }

  /** The last line, kept (a terminal's line is ended). */
  void finish(String line) {
    if (terminal) {
      draw(line);
      err.println();
    } else if (!line.equals(last)) {
      err.println(line);
    }
    err.flush();
    last = line;
  }

  private void draw(String line) {
    err.print('\r');
    err.print(line);
    if (drawn > line.length()) {
      err.print(" ".repeat(drawn - line.length()));
    }
    err.flush();
    drawn = line.length();
  }

  /**
   * A snapshot's progress from a pipeline status's {@code snapshot} object, e.g. {@code incremental
   * snapshot running [########------------] 40% tables 2/5 rows 12,000/~30,000 public.orders 12s}.
   * The row estimate comes from the planner's statistics, so the percentage is a guide.
   */
  static String snapshotLine(JsonNode s) {
    if (s == null || !s.isObject()) {
      return "no snapshot";
    }
    String state = s.path("state").asText("?");
    int tablesDone = s.path("tablesDone").asInt();
    int tablesTotal = s.path("tablesTotal").asInt();
    long rows = s.path("rowsDone").asLong();
    long estimated = s.path("rowsEstimated").asLong();
    int percent;
    if (state.equals("done")) {
      percent = 100;
    } else if (estimated > 0) {
      percent = (int) Math.min(99, rows * 100 / estimated);
    } else if (tablesTotal > 0) {
      percent = Math.min(99, tablesDone * 100 / tablesTotal);
    } else {
      percent = 0;
    }
    int filled = percent * BAR / 100;
    StringBuilder out = new StringBuilder();
    out.append(s.path("kind").asText("?"))
        .append(" snapshot ")
        .append(state)
        .append(" [")
        .append("#".repeat(filled))
        .append("-".repeat(BAR - filled))
        .append("] ")
        .append(String.format(Locale.ROOT, "%3d%%", percent))
        .append(" tables ")
        .append(tablesDone)
        .append('/')
        .append(tablesTotal)
        .append(" rows ")
        .append(String.format(Locale.ROOT, "%,d", rows));
    if (estimated > 0) {
      out.append(String.format(Locale.ROOT, "/~%,d", estimated));
    }
    if (s.hasNonNull("table") && state.equals("running")) {
      out.append(' ').append(s.get("table").asText());
    }
    out.append(' ').append(duration(s.path("elapsedMillis").asLong()));
    return out.toString();
  }

  /** 950 ms -> {@code 0s}, 75 s -> {@code 1m15s}, 2 h -> {@code 2h00m}. */
  static String duration(long millis) {
    long s = millis / 1000;
    if (s < 60) {
      return s + "s";
    }
    if (s < 3600) {
      return String.format(Locale.ROOT, "%dm%02ds", s / 60, s % 60);
    }
    return String.format(Locale.ROOT, "%dh%02dm", s / 3600, (s % 3600) / 60);
  }
}
