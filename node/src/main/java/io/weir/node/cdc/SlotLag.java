package io.weir.node.cdc;

import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.source.SourceSettings;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The configured pipelines' replication slots as their source server reports them ({@code
 * pg_replication_slots}): how far each slot's confirmed position is behind the server's WAL, and
 * how much WAL it holds on the server's disk. Unlike a pipeline's own status this is known whatever
 * the pipeline does (running, backing off, stopped, halted) and on every node, since it is asked of
 * the source itself: it is the lag an operator watches for a full disk. For {@code GET
 * /admin/slots}.
 *
 * <p>One plain connection per distinct source and refresh, on the blocking-I/O dispatcher; a report
 * is reused for {@code ttl} and concurrent callers share one refresh, so any number of open
 * consoles cost the source at most one query per source every {@code ttl}. A source that cannot be
 * reached gives its slots a value-free {@code error} (the exception's class) instead of failing the
 * report.
 */
public final class SlotLag {
  private static final Logger log = LoggerFactory.getLogger(SlotLag.class);
  private static final Duration LOG_EVERY = Duration.ofMinutes(1);

  /**
   * The source's position (its WAL insert position, or the last WAL received on a standby) against
   * each slot's. Values are positions and sizes only.
   */
  static final String QUERY =
      "SELECT s.slot_name, s.active, s.wal_status, s.confirmed_flush_lsn::text,"
          + " pg_wal_lsn_diff(w.lsn, s.confirmed_flush_lsn)::bigint, pg_wal_lsn_diff(w.lsn, s.restart_lsn)::bigint,"
          + " s.safe_wal_size"
          + " FROM pg_replication_slots s,"
          + " (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END AS lsn) w"
          + " WHERE s.slot_type = 'logical' AND s.slot_name = ANY (?)";

  /**
   * One pipeline's slot.
   *
   * @param exists whether the source has the slot (false before a first start or after a drop)
   * @param active whether a connection streams from it now
   * @param walStatus PostgreSQL's {@code wal_status}: reserved, extended, unreserved or lost
   * @param confirmedLsn the slot's {@code confirmed_flush_lsn}
   * @param lagBytes WAL bytes between the source's position and the slot's confirmed position
   * @param retainedBytes WAL bytes the slot keeps on the source's disk (from its {@code
   *     restart_lsn})
   * @param safeWalBytes bytes of WAL that may still be written before the slot is lost to {@code
   *     max_slot_wal_keep_size}; null without a limit
   * @param error null, or why the source could not be asked (an exception class name)
   */
  public record Slot(
      String pipeline,
      String slot,
      boolean exists,
      Boolean active,
      String walStatus,
      String confirmedLsn,
      Long lagBytes,
      Long retainedBytes,
      Long safeWalBytes,
      String error) {}

  /**
   * @param sampledAt when the sources were asked (ISO-8601)
   */
  public record Report(String sampledAt, List<Slot> slots) {}

  private final List<PipelineConfig> pipelines;
  private final Executor blocking;
  private final Duration ttl;
  private final Clock clock;
  private final Map<SourceSettings, Instant> lastLogged = new ConcurrentHashMap<>();
  private CompletableFuture<Report> current;
  private Instant currentAt = Instant.MIN;

  public SlotLag(List<PipelineConfig> pipelines, Executor blocking, Duration ttl, Clock clock) {
    this.pipelines = List.copyOf(pipelines);
    this.blocking = blocking;
    this.ttl = ttl;
    this.clock = clock;
  }

  /** A report at most {@code ttl} old; a failed refresh is not reused. */
  public synchronized CompletionStage<Report> report() {
    Instant now = clock.instant();
    boolean fresh =
        current != null
            && !current.isCompletedExceptionally()
            && (!current.isDone() || Duration.between(currentAt, now).compareTo(ttl) < 0);
    if (!fresh) {
      currentAt = now;
      current = CompletableFuture.supplyAsync(this::ask, blocking);
    }
    return current;
  }

  private Report ask() {
    Instant at = clock.instant();
    Map<SourceSettings, List<PipelineConfig>> bySource = new LinkedHashMap<>();
    pipelines.forEach(p -> bySource.computeIfAbsent(p.source(), s -> new ArrayList<>()).add(p));
    Map<String, Slot> byPipeline = new HashMap<>();
    bySource.forEach(
        (source, group) -> {
          try {
            Map<String, Slot> found = askSource(source, group);
            group.forEach(
                p ->
                    byPipeline.put(
                        p.settings().name(),
                        found.getOrDefault(
                            p.settings().slot(),
                            new Slot(
                                p.settings().name(),
                                p.settings().slot(),
                                false,
                                null,
                                null,
                                null,
                                null,
                                null,
                                null,
                                null))));
          } catch (SQLException | RuntimeException e) {
            Instant last = lastLogged.get(source);
            if (last == null || Duration.between(last, at).compareTo(LOG_EVERY) >= 0) {
              lastLogged.put(source, at);
              log.warn(
                  "replication slots of {} pipeline(s) could not be read from their source: {}",
                  group.size(),
                  SafeErrors.describe(e));
            }
            String error = e.getClass().getSimpleName();
            group.forEach(
                p ->
                    byPipeline.put(
                        p.settings().name(),
                        new Slot(
                            p.settings().name(),
                            p.settings().slot(),
                            false,
                            null,
                            null,
                            null,
                            null,
                            null,
                            null,
                            error)));
          }
        });
    List<Slot> slots = pipelines.stream().map(p -> byPipeline.get(p.settings().name())).toList();
    return new Report(at.toString(), slots);
  }

  /** Slot name -> its row, for the slots of {@code group} that exist on {@code source}. */
  private static Map<String, Slot> askSource(SourceSettings source, List<PipelineConfig> group)
      throws SQLException {
    Map<String, String> pipelineOf = new HashMap<>();
    group.forEach(p -> pipelineOf.put(p.settings().slot(), p.settings().name()));
    Map<String, Slot> out = new HashMap<>();
    try (Connection c = source.connect("weir-slot-lag")) {
      c.setReadOnly(true);
      try (PreparedStatement ps = c.prepareStatement(QUERY)) {
        ps.setQueryTimeout(10);
        ps.setArray(1, c.createArrayOf("text", pipelineOf.keySet().toArray()));
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            String slot = rs.getString(1);
            out.put(
                slot,
                new Slot(
                    pipelineOf.get(slot),
                    slot,
                    true,
                    rs.getBoolean(2),
                    rs.getString(3),
                    rs.getString(4),
                    nullableLong(rs, 5),
                    nullableLong(rs, 6),
                    nullableLong(rs, 7),
                    null));
          }
        }
      }
    }
    return out;
  }

  private static Long nullableLong(ResultSet rs, int column) throws SQLException {
    long v = rs.getLong(column);
    return rs.wasNull() ? null : v;
  }
}
