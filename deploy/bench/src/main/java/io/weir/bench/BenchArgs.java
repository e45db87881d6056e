package io.weir.bench;

import java.util.Map;
import picocli.CommandLine;

/** What every benchmark's command line shares: picocli parsing, range checks, the database. */
final class BenchArgs {
  private BenchArgs() {}

  /** Thrown for a malformed command line; the message says what was wrong (empty for --help). */
  static final class UsageException extends Exception {
    UsageException(String message) {
      super(message);
    }
  }

  /** Parses {@code args} into {@code spec}'s picocli options; --help is an empty usage error. */
  static <T> T parse(T spec, String[] args) throws UsageException {
    try {
      if (new CommandLine(spec).parseArgs(args).isUsageHelpRequested()) {
        throw new UsageException("");
      }
    } catch (CommandLine.ParameterException e) {
      throw new UsageException(e.getMessage());
    }
    return spec;
  }

  /** The usage text picocli makes of {@code spec}'s annotations. */
  static String usage(Object spec) {
    return new CommandLine(spec).getUsageMessage(CommandLine.Help.Ansi.OFF);
  }

  static int range(String option, int value, int min, int max) throws UsageException {
    if (value < min || value > max) {
      throw new UsageException(option + " must be between " + min + " and " + max);
    }
    return value;
  }

  static String require(Map<String, String> env, String name) throws UsageException {
    String v = env.get(name);
    if (v == null || v.isBlank()) {
      throw new UsageException(name + " is not set; run: eval \"$(deploy/bin/pg.sh start)\"");
    }
    return v;
  }

  /** WEIR_PG_URL, which must be a PostgreSQL JDBC URL. */
  static String url(Map<String, String> env) throws UsageException {
    String url = require(env, "WEIR_PG_URL");
    if (!url.startsWith("jdbc:postgresql://")) {
      throw new UsageException("WEIR_PG_URL must be a JDBC URL starting with jdbc:postgresql://");
    }
    return url;
  }
}
