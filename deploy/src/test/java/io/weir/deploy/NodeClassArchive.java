package io.weir.deploy;

import io.weir.persistence.testing.TestPostgres;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;

/**
 * A class-data-sharing archive of the node's classes (JDK 17 dynamic AppCDS), so that each test
 * node maps the classes a node loads at start-up instead of parsing and verifying them again.
 * Measured on this project's 2-core machine: a node ready after 2.3-3.1 s instead of 5.1-6.1 s,
 * with 5.0 CPU-s instead of 7.7 (end-to-end classes start about 85 nodes).
 *
 * <p>One training node per build makes it: it starts against a scratch database, answers a few
 * requests, and on SIGTERM the JVM writes the classes it loaded ({@code -XX:ArchiveClassesAtExit}).
 * The archive is kept in {@code deploy/target/cds/} with a key naming the JDK and every jar of the
 * node's class path (size and modification time), and made again when the key differs; parallel
 * test JVMs take a file lock, so one trains, and the others start their nodes without the archive
 * until it is there. Whatever goes wrong, nodes start without the archive (and the JVM itself
 * ignores an archive whose class path changed), so this never changes what a test checks, only how
 * fast nodes start. {@code -Dweir.e2e.cds=false} turns it off.
 */
final class NodeClassArchive {
  private static final org.slf4j.Logger log =
      org.slf4j.LoggerFactory.getLogger(NodeClassArchive.class);
  private static final Duration TRAINING_DEADLINE = Duration.ofMinutes(2);
  private static List<String> options;

  private NodeClassArchive() {}

  /** The JVM options that make a node use the archive; empty when there is none. */
  static synchronized List<String> options() {
    if (options == null) {
      List<String> prepared = prepare();
      if (prepared == null) {
        return List
            .of(); // another test JVM is making it: this node starts without, later ones map it
      }
      options = prepared;
    }
    return options;
  }

  /** The options, or null while another test JVM trains (asked again at the next node start). */
  private static List<String> prepare() {
    if (!Boolean.parseBoolean(System.getProperty("weir.e2e.cds", "true"))) {
      return List.of();
    }
    Path dir = TestPostgres.repoRoot().resolve("deploy/target/cds");
    Path archive = dir.resolve("weir-node.jsa");
    Path keyFile = dir.resolve("weir-node.key");
    try {
      Files.createDirectories(dir);
      String key = key();
      try (FileChannel channel =
              FileChannel.open(
                  dir.resolve("lock"), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
          FileLock lock = channel.tryLock()) {
        if (lock == null) {
          return current(archive, keyFile, key)
              ? List.of("-XX:SharedArchiveFile=" + archive)
              : null;
        }
        if (!current(archive, keyFile, key)) {
          Files.deleteIfExists(keyFile);
          if (train(dir, archive)) {
            Files.writeString(keyFile, key, StandardCharsets.UTF_8);
          }
        }
      }
      return current(archive, keyFile, key)
          ? List.of("-XX:SharedArchiveFile=" + archive)
          : List.of();
    } catch (IOException | RuntimeException e) {
      log.info(
          "node class archive: not used ({}); nodes start slower", e.getClass().getSimpleName());
      return List.of();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return List.of();
    }
  }

  private static boolean current(Path archive, Path keyFile, String key) throws IOException {
    return Files.isRegularFile(archive)
        && Files.size(archive) > 0
        && Files.isRegularFile(keyFile)
        && Files.readString(keyFile, StandardCharsets.UTF_8).equals(key);
  }

  /** The JDK and every jar of the node's class path, with size and modification time. */
  private static String key() throws IOException {
    Path jar = NodeProcess.nodeJar();
    StringBuilder key =
        new StringBuilder()
            .append(System.getProperty("java.home"))
            .append(' ')
            .append(System.getProperty("java.vm.version"))
            .append('\n');
    List<Path> jars;
    try (Stream<Path> lib = Files.list(jar.resolveSibling("lib"))) {
      jars = Stream.concat(Stream.of(jar), lib.sorted()).toList();
    }
    for (Path p : jars) {
      key.append(p.getFileName())
          .append(' ')
          .append(Files.size(p))
          .append(' ')
          .append(Files.getLastModifiedTime(p).toMillis())
          .append('\n');
    }
    return key.toString();
  }

  /**
   * Starts a training node that writes the archive when it exits; true when the archive is in
   * place.
   */
  private static boolean train(Path dir, Path archive) throws IOException, InterruptedException {
    long started = System.nanoTime();
    Path written = dir.resolve("training-" + UUID.randomUUID() + ".jsa");
    TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("cdstrain");
    NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("class-archive-training")
                .database(db)
                .jvm("-XX:ArchiveClassesAtExit=" + written));
    try {
      try {
        org.awaitility.Awaitility.await("the training node is ready")
            .atMost(TRAINING_DEADLINE)
            .pollInterval(Duration.ofMillis(200))
            .until(() -> node.ready() || !node.isAlive());
      } catch (org.awaitility.core.ConditionTimeoutException e) {
        // handled below: not ready
      }
      if (!node.ready()) {
        log.info("node class archive: the training node did not start; not used");
        return false;
      }
      // Requests load the HTTP, JSON and partition classes every test uses.
      node.get("/admin/cluster", true);
      node.get("/admin/partitions", true);
      node.send(
          "PUT",
          "/v1/documents/training/a",
          "{\"v\":1}",
          java.util.Map.of("Content-Type", "application/json"));
      node.get("/v1/documents/training/a", true);
      node.terminate();
      int status;
      try {
        status = node.waitForExit(TRAINING_DEADLINE);
      } catch (AssertionError e) {
        log.info("node class archive: the training node did not exit; not used");
        return false;
      }
      if (status != 0 && status != 143 || !Files.isRegularFile(written)) {
        log.info("node class archive: the training node ended with status {}; not used", status);
        return false;
      }
      Files.move(
          written, archive, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      log.info(
          "node class archive: trained in {} s, {} MiB",
          String.format("%.1f", (System.nanoTime() - started) / 1e9),
          Files.size(archive) >> 20);
      return true;
    } finally {
      node.close();
      Files.deleteIfExists(written);
      db.close();
    }
  }
}
