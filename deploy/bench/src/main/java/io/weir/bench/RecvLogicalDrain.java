package io.weir.bench;

import io.weir.protocol.Lsn;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The reference consumer: PostgreSQL's own {@code pg_recvlogical} streaming a slot with the same
 * pgoutput options Weir asks for, writing to /dev/null and exiting at {@code --endpos}. Timed from
 * process start to exit, so its connect and start-up count, as Weir's do.
 */
final class RecvLogicalDrain {
  private final BenchDatabase db;
  private final Path binary;

  RecvLogicalDrain(BenchDatabase db, String bindir) {
    this.db = db;
    this.binary = Path.of(bindir, "pg_recvlogical");
  }

  /** {@code pg_recvlogical --version}, e.g. "pg_recvlogical (PostgreSQL) 15.13". */
  String version() throws IOException, InterruptedException {
    Process p =
        new ProcessBuilder(binary.toString(), "--version").redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    p.waitFor(10, TimeUnit.SECONDS);
    return out;
  }

  /** What one drain took: wall time, and the CPU time pg_recvlogical itself used. */
  record Result(long nanos, double cpuSeconds) {}

  /**
   * Drains {@code slot} up to {@code endLsn}.
   *
   * @param messages the pgoutput {@code messages} option, as Weir's pipeline sends it
   */
  Result drain(String slot, long endLsn, boolean messages)
      throws IOException, InterruptedException {
    if (!Files.isExecutable(binary)) {
      throw new IOException(binary + " is not executable (is WEIR_PG_BINDIR right?)");
    }
    List<String> command =
        List.of(
            binary.toString(),
            "--dbname=host="
                + db.host()
                + " port="
                + db.port()
                + " dbname="
                + db.name()
                + " user="
                + db.user()
                + " application_name=bench_recvlogical",
            "--slot=" + slot,
            "--start",
            "--no-loop",
            // Same plugin options as Weir's ReplicationConnection.
            "--option=proto_version=1",
            "--option=publication_names=" + BenchDatabase.PUBLICATION,
            "--option=messages=" + messages,
            "--endpos=" + Lsn.of(endLsn),
            "--file=/dev/null",
            // No fsync of /dev/null; progress is still reported to the server.
            "--fsync-interval=0");
    File errors = File.createTempFile("bench-recvlogical", ".log");
    try {
      ProcessBuilder pb =
          new ProcessBuilder(command)
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .redirectError(errors);
      pb.environment().put("PGPASSWORD", db.password());
      CpuTimes cpu = CpuTimes.now();
      long start = System.nanoTime();
      Process p = pb.start();
      if (!p.waitFor(30, TimeUnit.MINUTES)) {
        p.destroyForcibly();
        throw new IOException("pg_recvlogical did not reach the end position within 30 minutes");
      }
      long elapsed = System.nanoTime() - start;
      if (p.exitValue() != 0) {
        String log = Files.readString(errors.toPath(), StandardCharsets.UTF_8).trim();
        throw new IOException("pg_recvlogical exited with status " + p.exitValue() + ": " + log);
      }
      // waitFor has reaped the child, so its CPU time is in this process's children's total.
      return new Result(elapsed, CpuTimes.now().children() - cpu.children());
    } finally {
      Files.deleteIfExists(errors.toPath());
    }
  }
}
