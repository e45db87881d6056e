package io.weir.deploy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Debian's {@code chromium} in headless mode, one fresh profile per run, for tests that load a page
 * as a person's browser would. {@code deploy/bin/test.sh} installs the package when it is missing
 * (as root); without it {@link #find()} fails and says what to install, it never skips.
 */
final class HeadlessChromium implements AutoCloseable {
  /** Flags that work as root in a container without a display, GPU or network beyond loopback. */
  private static final List<String> FLAGS =
      List.of(
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--disable-dev-shm-usage",
          "--hide-scrollbars",
          "--enable-logging=stderr",
          "--v=0");

  private final Path binary;
  private final Path workDir;

  private HeadlessChromium(Path binary, Path workDir) {
    this.binary = binary;
    this.workDir = workDir;
  }

  /**
   * The browser: {@code $WEIR_CHROMIUM}, else chromium on the PATH or in /usr/bin; its runs keep
   * their files in {@code workDir}, deleted by {@link #close()}.
   */
  static HeadlessChromium find(Path workDir) {
    List<Path> candidates = new ArrayList<>();
    String configured = System.getenv("WEIR_CHROMIUM");
    if (configured != null && !configured.isBlank()) {
      candidates.add(Path.of(configured));
    }
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin").split(":")) {
      if (!dir.isEmpty()) {
        candidates.add(Path.of(dir, "chromium"));
      }
    }
    candidates.add(Path.of("/usr/bin/chromium"));
    for (Path c : candidates) {
      if (Files.isRegularFile(c) && Files.isExecutable(c)) {
        return new HeadlessChromium(c, workDir);
      }
    }
    throw new AssertionError(
        "headless Chromium is needed for the console test and was not found (looked at "
            + "$WEIR_CHROMIUM, chromium on the PATH and /usr/bin/chromium). Install Debian's package: "
            + "apt-get install -y chromium (as root; deploy/bin/test.sh does this itself when run as root), "
            + "or set WEIR_CHROMIUM to a Chromium binary.");
  }

  /** Deletes the profiles and output files of every run. */
  @Override
  public void close() throws IOException {
    try (java.util.stream.Stream<Path> all = Files.walk(workDir)) {
      for (Path p : all.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }

  /** What one run printed. */
  record Run(int exit, String stdout, String stderr) {
    /** Console messages the page logged, CSP refusals among them ({@code INFO:CONSOLE} lines). */
    List<String> consoleLines() {
      return stderr
          .lines()
          .filter(
              l ->
                  l.contains(":CONSOLE")
                      || l.contains("Content Security Policy")
                      || l.contains("Refused to"))
          .toList();
    }
  }

  /**
   * Loads {@code url}, lets {@code virtualMillis} of virtual time pass (timers run, network
   * requests are awaited), then does what {@code action} says ({@code --dump-dom} or {@code
   * --screenshot=<file>}).
   */
  Run run(String url, int virtualMillis, String... action)
      throws IOException, InterruptedException {
    Path profile = Files.createTempDirectory(workDir, "chromium-profile-");
    Path out = Files.createTempFile(workDir, "chromium-", ".out");
    Path err = Files.createTempFile(workDir, "chromium-", ".err");
    List<String> cmd = new ArrayList<>();
    cmd.add(binary.toString());
    cmd.addAll(FLAGS);
    cmd.add("--user-data-dir=" + profile);
    cmd.add("--virtual-time-budget=" + virtualMillis);
    cmd.addAll(List.of(action));
    cmd.add(url);
    Process p =
        new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile()).start();
    try {
      if (!p.waitFor(180, TimeUnit.SECONDS)) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
        throw new AssertionError(
            "chromium did not finish within 180 s; its log: " + Files.readString(err));
      }
      return new Run(
          p.exitValue(),
          Files.readString(out, StandardCharsets.UTF_8),
          Files.readString(err, StandardCharsets.UTF_8));
    } finally {
      p.descendants().forEach(ProcessHandle::destroyForcibly);
    }
  }
}
