package io.weir.persistence.cdc;

import io.weir.protocol.CborSerializable;

/**
 * A pipeline's state for operators. Every field is value-free.
 *
 * @param state running, connecting, backoff, halted, stopped, dropping or dropped (its slot and
 *     checkpoints were dropped; a start is a first start)
 * @param reason the typed halt reason ({@link HaltReason#wire()}) when halted; while in backoff
 *     because the sink paused for a typed cause, that cause ({@code quota-exceeded}, {@code
 *     storage-behind}, {@code storage-copies-insufficient}, {@code table-apply-failed}); else null
 * @param detail value-free detail of the halt or of the last transient error, else null
 * @param confirmedLsn the position last confirmed to PostgreSQL as flushed
 * @param lagBytes WAL bytes between what the server has sent and what is confirmed
 * @param incarnation the slot incarnation key, once known
 * @param snapshot the running or last snapshot's progress, null if none ran in this process
 */
public record PipelineStatus(
    String name,
    String state,
    String reason,
    String detail,
    String slot,
    String confirmedLsn,
    long lagBytes,
    long transactions,
    long rows,
    int restarts,
    String incarnation,
    SnapshotStatus snapshot)
    implements CborSerializable {}
