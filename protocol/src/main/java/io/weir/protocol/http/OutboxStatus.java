package io.weir.protocol.http;

import java.util.Map;

/**
 * One partition in the reply of {@code GET /admin/outbox/status}.
 *
 * @param documents documents held, tombstones included
 * @param outboxFirst the first retained outbox sequence
 * @param outboxNext the sequence the next entry will get
 * @param outboxEntries retained entries ({@code outboxNext - outboxFirst})
 * @param outboxBytes bytes of the retained entries (before and after images plus a fixed overhead)
 * @param journalEvents journal events written so far
 * @param watermarks per CDC source (pipeline and slot incarnation): the highest fully applied
 *     commit LSN, as {@code file/offset}
 */
public record OutboxStatus(
    int partition, long documents, long outboxFirst, long outboxNext, long outboxEntries, long outboxBytes,
    long journalEvents, Map<String, String> watermarks) {
  public OutboxStatus {
    watermarks = Map.copyOf(watermarks);
  }
}
