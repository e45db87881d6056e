package io.weir.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;
import java.util.stream.Stream;

/**
 * The steps of one failover, read from the survivors' logs: when a survivor's failure detector
 * marked the killed member unreachable, when the split-brain resolver downed it, when the leader
 * removed it, when the pipelines' singleton started on the next oldest member, and when the
 * pipeline logged that it streams its slot again. Each is the earliest line after the kill, in
 * seconds after it (NaN when no survivor logged it). The lines are Pekko's and Weir's own INFO and
 * WARN lines, timestamped by logback to the millisecond with the zone's offset.
 *
 * @param unreachable the failure detector's verdict
 * @param downed the split-brain resolver's decision, or a survivor's ended-session downing (ADR
 *     0051)
 * @param removed the leader removing the downed member
 * @param singletons the pipelines' singleton starting on a survivor
 * @param streaming the pipeline streaming its slot again
 */
record FailoverTimeline(
    double unreachable, double downed, double removed, double singletons, double streaming) {

  /** What a run's survivors logged after {@code killedAt} about the member at {@code address}. */
  static FailoverTimeline read(
      List<Path> survivorLogs, Instant killedAt, String address, String pipeline) {
    List<Predicate<String>> steps =
        List.of(
            l -> l.contains("Marking node as UNREACHABLE") && l.contains(address + ","),
            l ->
                l.contains("SBR is downing") && l.contains(address)
                    || l.contains(
                        "member " + address + " is unreachable and its PostgreSQL session"),
            l -> l.contains("Leader is removing") && l.contains(address + "]"),
            l ->
                l.contains("Singleton manager starting singleton actor")
                    && l.contains("singletonManagerweir-pipelines"),
            l -> l.contains("pipeline " + pipeline + ": streaming slot"));
    double[] first = new double[steps.size()];
    Arrays.fill(first, Double.NaN);
    for (Path log : survivorLogs) {
      // Each log read once; per step, its first line after the kill, the earliest over the logs.
      boolean[] seen = new boolean[steps.size()];
      try (Stream<String> lines = Files.lines(log, StandardCharsets.UTF_8)) {
        for (String l : (Iterable<String>) lines::iterator) {
          for (int k = 0; k < steps.size(); k++) {
            if (seen[k] || !steps.get(k).test(l)) {
              continue;
            }
            Instant at = timestamp(l);
            if (at != null && !at.isBefore(killedAt)) {
              seen[k] = true;
              double s = (at.toEpochMilli() - killedAt.toEpochMilli()) / 1000.0;
              if (Double.isNaN(first[k]) || s < first[k]) {
                first[k] = s;
              }
            }
          }
        }
      } catch (IOException | UncheckedIOException e) {
        // A log that cannot be read leaves its steps unknown (NaN), never a wrong figure.
      }
    }
    return new FailoverTimeline(first[0], first[1], first[2], first[3], first[4]);
  }

  /** Logback's {@code %d{yyyy-MM-dd'T'HH:mm:ss.SSSX}}: Z in UTC, else an offset such as +01. */
  private static final DateTimeFormatter STAMP =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSX");

  private static Instant timestamp(String line) {
    int space = line.indexOf(' ');
    if (space <= 0) {
      return null;
    }
    try {
      return OffsetDateTime.parse(line.substring(0, space), STAMP).toInstant();
    } catch (DateTimeParseException e) {
      return null;
    }
  }
}
