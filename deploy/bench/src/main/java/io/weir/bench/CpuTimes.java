package io.weir.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Stream;

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
      // Fields after the parenthesised command name: state is field 3; utime 14, stime 15, cutime
      // 16, cstime 17.
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
      return new CpuTimes(
          (Long.parseLong(f[11]) + Long.parseLong(f[12])) * TICK,
          (Long.parseLong(f[13]) + Long.parseLong(f[14])) * TICK);
    } catch (IOException | RuntimeException e) {
      return new CpuTimes(Double.NaN, Double.NaN);
    }
  }

  /**
   * CPU seconds (user + system) process {@code pid} has used so far; 0 if it is gone or /proc is
   * not readable.
   */
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

  /**
   * CPU seconds so far of this JVM's threads by thread id, for the threads alive now, split into
   * the JIT compiler's ({@code C1/C2 CompilerThread}) and the garbage collector's and VM thread's
   * ({@code GC Thread#} and {@code G1 ...} of G1, {@code Z...} of ZGC, {@code Shenandoah ...},
   * {@code VM Thread}); others are not kept.
   */
  record ThreadCpu(Map<Long, Double> jit, Map<Long, Double> gc) {
    /** The collector's threads of G1, ZGC and Shenandoah, and the VM thread (safepoints). */
    static boolean isCollector(String name) {
      return name.startsWith("GC Thread")
          || name.startsWith("G1 ")
          || name.startsWith("Shenandoah ")
          || name.equals("VM Thread")
          || (name.length() > 1 && name.charAt(0) == 'Z' && Character.isUpperCase(name.charAt(1)));
    }

    static ThreadCpu now() {
      return of("self");
    }

    /** The same for process {@code pid} (empty when it is gone). */
    static ThreadCpu of(long pid) {
      return of(Long.toString(pid));
    }

    private static ThreadCpu of(String process) {
      Map<Long, Double> jit = new HashMap<>();
      Map<Long, Double> gc = new HashMap<>();
      try (Stream<Path> tasks = Files.list(Path.of("/proc", process, "task"))) {
        for (Path task : (Iterable<Path>) tasks::iterator) {
          try {
            String stat = Files.readString(task.resolve("stat"), StandardCharsets.US_ASCII);
            String name = stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
            double cpu = (Long.parseLong(f[11]) + Long.parseLong(f[12])) * TICK;
            long tid = Long.parseLong(task.getFileName().toString());
            if (name.startsWith("C1 CompilerThre") || name.startsWith("C2 CompilerThre")) {
              jit.put(tid, cpu);
            } else if (isCollector(name)) {
              gc.put(tid, cpu);
            }
          } catch (IOException | RuntimeException gone) {
            // The thread ended meanwhile.
          }
        }
      } catch (IOException | RuntimeException e) {
        return new ThreadCpu(Map.of(), Map.of());
      }
      return new ThreadCpu(jit, gc);
    }

    /** JIT CPU seconds since {@code earlier} (threads that ended meanwhile are not counted). */
    double jitSince(ThreadCpu earlier) {
      return since(jit, earlier.jit);
    }

    /** GC and VM-thread CPU seconds since {@code earlier}. */
    double gcSince(ThreadCpu earlier) {
      return since(gc, earlier.gc);
    }

    private static double since(Map<Long, Double> now, Map<Long, Double> then) {
      double sum = 0;
      for (Map.Entry<Long, Double> e : now.entrySet()) {
        sum += e.getValue() - then.getOrDefault(e.getKey(), 0.0);
      }
      return sum;
    }
  }
}
