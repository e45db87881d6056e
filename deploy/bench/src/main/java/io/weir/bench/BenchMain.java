package io.weir.bench;

import io.weir.persistence.SafeErrors;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Map;

/**
 * The shared {@code main} of the benchmark programs: quiet logs, options or usage, run, exit
 * status.
 */
final class BenchMain {
  private BenchMain() {}

  interface Parser<O> {
    O parse(String[] args, Map<String, String> env) throws BenchArgs.UsageException;
  }

  interface Program<O> {
    int run(O options) throws Exception;
  }

  /**
   * Parses {@code args}; on a usage error prints it with {@code usage} and exits 2 (0 for --help);
   * otherwise runs the program and exits with its status (1 if it throws).
   */
  static <O> void main(String[] args, Parser<O> parser, String usage, Program<O> program) {
    // Quiet logs (INFO lines would interleave with the tables) unless the caller chose a level.
    if (System.getProperty("WEIR_LOG_LEVEL") == null && System.getenv("WEIR_LOG_LEVEL") == null) {
      System.setProperty("WEIR_LOG_LEVEL", "WARN");
    }
    O options;
    try {
      options = parser.parse(args, System.getenv());
    } catch (BenchArgs.UsageException e) {
      if (!e.getMessage().isEmpty()) {
        System.err.println("bench: " + e.getMessage());
      }
      System.err.print(usage);
      System.exit(e.getMessage().isEmpty() ? 0 : 2);
      return;
    }
    int code;
    try {
      code = program.run(options);
    } catch (Exception e) {
      // Class names only: a driver's message may quote a row value.
      System.err.println("bench: failed: " + SafeErrors.describe(e));
      code = 1;
    }
    System.exit(code);
  }

  /**
   * The first lines of a report: {@code title} with the date, a rule, the machine ({@link
   * CdcBenchmark#machine}) and the JVM's garbage collectors.
   */
  static void header(String title) {
    System.out.println(
        title
            + ", "
            + ZonedDateTime.now(ZoneOffset.UTC)
                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")));
    System.out.println("-".repeat(118));
    CdcBenchmark.machine();
    System.out.printf(
        "GC:            %s%n",
        String.join(
            ", ",
            ManagementFactory.getGarbageCollectorMXBeans().stream()
                .map(GarbageCollectorMXBean::getName)
                .toList()));
  }
}
