package io.weir.node.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * CPU time from {@code /proc/self/stat} (Linux): this JVM's own (user + system, every thread
 * including JIT and GC) and that of its children once reaped (pg_recvlogical). Resolution is a
 * clock tick (USER_HZ, 100 on Linux). NaN where /proc is not available.
 */
record CpuTimes(double self, double children) {
  private static final double TICK = 0.01;

  static CpuTimes now() {
    try {
      String stat = Files.readString(Path.of("/proc/self/stat"), StandardCharsets.US_ASCII);
      // Fields after the parenthesised command name: state is field 3; utime 14, stime 15, cutime 16, cstime 17.
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
      return new CpuTimes(
          (Long.parseLong(f[11]) + Long.parseLong(f[12])) * TICK, (Long.parseLong(f[13]) + Long.parseLong(f[14])) * TICK);
    } catch (IOException | RuntimeException e) {
      return new CpuTimes(Double.NaN, Double.NaN);
    }
  }

  /** CPU seconds (user + system) process {@code pid} has used so far; 0 if it is gone or /proc is not readable. */
  static double process(long pid) {
    try {
      String stat = Files.readString(Path.of("/proc/" + pid + "/stat"), StandardCharsets.US_ASCII);
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
      return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * TICK;
    } catch (IOException | RuntimeException e) {
      return 0;
    }
  }

  /**
   * CPU seconds the whole machine spent busy since boot, over all CPUs and processes (user, nice,
   * system, irq, softirq and steal of {@code /proc/stat}); NaN where it is not available.
   */
  static double machineBusy() {
    try {
      String line = Files.readAllLines(Path.of("/proc/stat"), StandardCharsets.US_ASCII).get(0);
      // cpu user nice system idle iowait irq softirq steal ...
      String[] f = line.trim().split("\\s+");
      long busy = 0;
      for (int i : new int[] {1, 2, 3, 6, 7, 8}) {
        busy += Long.parseLong(f[i]);
      }
      return busy * TICK;
    } catch (IOException | RuntimeException e) {
      return Double.NaN;
    }
  }
}
