package io.weir.persistence.cdc;

import java.nio.file.Path;

/**
 * Protocol version 2 streaming of in-progress transactions, and spilling them to disk (see
 * docs/cdc.md, "Large transactions").
 *
 * @param enabled request {@code proto_version '2', streaming 'on'}: the server sends a transaction
 *     that outgrows its {@code logical_decoding_work_mem} in chunks before it commits. Off:
 *     protocol 1, the server holds (and spills) each transaction until its commit, as before.
 * @param decodingWorkMemKb {@code logical_decoding_work_mem} for this pipeline's walsender session,
 *     in kB (at least 64); 0 keeps the server's setting. Smaller values stream sooner.
 * @param spillDirectory where streamed transactions go once {@code memoryBound} is used up (a
 *     subdirectory per pipeline, emptied whenever the pipeline starts); null holds every streamed
 *     transaction in memory, bounded only by {@code max-transaction-changes}
 * @param memoryBound bytes of streamed-transaction payload held in memory, across every open
 *     transaction and every committed one not yet delivered; past it, the transaction being
 *     appended to moves to disk
 * @param maxSpillBytes bytes the pipeline may keep in spill files; past it, the pipeline halts
 *     ({@link HaltReason#SPILL_LIMIT_EXCEEDED})
 */
public record StreamingSettings(
    boolean enabled,
    int decodingWorkMemKb,
    Path spillDirectory,
    long memoryBound,
    long maxSpillBytes) {

  /** PostgreSQL's lower bound for {@code logical_decoding_work_mem}. */
  public static final int MIN_DECODING_WORK_MEM_KB = 64;

  /** Streaming off; the spill bounds are the node defaults. */
  public static final StreamingSettings OFF =
      new StreamingSettings(false, 0, null, 64L << 20, 10L << 30);

  public StreamingSettings {
    if (decodingWorkMemKb != 0 && decodingWorkMemKb < MIN_DECODING_WORK_MEM_KB) {
      throw new IllegalArgumentException(
          "decoding work memory must be 0 (the server's) or at least 64 kB");
    }
    if (memoryBound <= 0 || maxSpillBytes <= 0) {
      throw new IllegalArgumentException("the spill memory bound and max bytes must be positive");
    }
  }

  /** Streaming on, the server's work memory, no spilling. */
  public static StreamingSettings on() {
    return new StreamingSettings(true, 0, null, OFF.memoryBound, OFF.maxSpillBytes);
  }

  public StreamingSettings withDecodingWorkMemKb(int kb) {
    return new StreamingSettings(enabled, kb, spillDirectory, memoryBound, maxSpillBytes);
  }

  /**
   * Spill to {@code directory} past {@code memoryBound} bytes in memory, halting past {@code
   * maxBytes} on disk.
   */
  public StreamingSettings withSpill(Path directory, long memoryBound, long maxBytes) {
    return new StreamingSettings(enabled, decodingWorkMemKb, directory, memoryBound, maxBytes);
  }

  /** Whether streamed transactions may go to disk. */
  public boolean spills() {
    return enabled && spillDirectory != null;
  }
}
