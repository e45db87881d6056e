package io.weir.persistence.cdc;

import io.weir.persistence.Identifiers;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.source.StartMode;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * Settings of one CDC pipeline.
 *
 * @param name pipeline name: the key of its checkpoint and slot incarnation
 * @param publications streamed together (their union); each must exist
 * @param excludedSchemas schemas whose tables must not be published to this pipeline (Weir's own,
 *     the sink's targets): streaming them would feed the pipeline's writes back into itself
 * @param failover request a failover slot (PostgreSQL 17+ only)
 * @param maxCommandRetries failed connect cycles before the stream is established, before halting
 *     (0: halt on the first)
 * @param maxSinkRetries sink failures in a row at the same transaction (nothing acknowledged in
 *     between) retried before the pipeline halts {@code sink-failing} (0: halt on the first); only
 *     failures with a SQLState outside the transient classes count (see {@link
 *     CdcPipeline#isTransientSqlState})
 * @param handoverWindow how long "slot active for another consumer" is retried without counting; at
 *     least the server's wal_sender_timeout is used
 * @param inFlightWindow transactions decoded but not yet durably applied (backpressure bound)
 * @param batchMaxTransactions 1 delivers one transaction per sink call; more groups transactions
 * @param batchMaxDelay how long a partial batch may wait for more transactions
 * @param maxTransactionChanges changes one transaction may hold in memory before the pipeline halts
 * @param statusInterval status update period; zero derives a third of wal_sender_timeout
 * @param messages deliver logical decoding messages: transactional ones inside their transaction,
 *     non-transactional ones to {@link ChangeSink#onMessage} (the sink must accept them)
 * @param streaming protocol 2 streaming of in-progress transactions and spilling them to disk
 * @param snapshotBatchRows rows per sink call when reading a snapshot (initial: a batch;
 *     incremental: a chunk)
 * @param incrementalAtStart run an incremental snapshot of every published table the first time the
 *     pipeline streams (resumed after restarts until it completes)
 * @param incrementalMaxUnkeyedRows an incremental snapshot reads a table without a primary key (or
 *     replica identity index) whole; beyond this many rows it halts {@code snapshot-failed}
 */
public record PipelineSettings(
    String name,
    String slot,
    List<String> publications,
    StartMode startMode,
    List<String> excludedSchemas,
    boolean failover,
    int maxCommandRetries,
    int maxSinkRetries,
    Duration minBackoff,
    Duration maxBackoff,
    Duration handoverWindow,
    int inFlightWindow,
    int batchMaxTransactions,
    Duration batchMaxDelay,
    int maxTransactionChanges,
    Duration statusInterval,
    boolean messages,
    StreamingSettings streaming,
    int snapshotBatchRows,
    boolean incrementalAtStart,
    int incrementalMaxUnkeyedRows) {

  public PipelineSettings {
    publications = List.copyOf(publications);
    excludedSchemas = List.copyOf(excludedSchemas);
    Objects.requireNonNull(streaming, "streaming");
  }

  /** Defaults for everything but names. */
  public static PipelineSettings of(String name, String slot, List<String> publications) {
    return new PipelineSettings(
        name,
        slot,
        publications,
        StartMode.GO_FORWARD,
        List.of("weir"),
        false,
        5,
        10,
        Duration.ofMillis(500),
        Duration.ofSeconds(30),
        Duration.ofSeconds(60),
        64,
        1,
        Duration.ofMillis(100),
        500_000,
        Duration.ZERO,
        false,
        StreamingSettings.OFF,
        5_000,
        false,
        100_000);
  }

  public PipelineSettings withStartMode(StartMode mode) {
    return toBuilder().startMode(mode).build();
  }

  public PipelineSettings withExcludedSchemas(List<String> schemas) {
    return toBuilder().excludedSchemas(schemas).build();
  }

  public PipelineSettings withFailover(boolean on) {
    return toBuilder().failover(on).build();
  }

  public PipelineSettings withBatching(int maxTransactions, Duration maxDelay) {
    return toBuilder().batchMaxTransactions(maxTransactions).batchMaxDelay(maxDelay).build();
  }

  public PipelineSettings withRetries(int maxRetries, Duration minBackoff, Duration maxBackoff) {
    return toBuilder()
        .maxCommandRetries(maxRetries)
        .minBackoff(minBackoff)
        .maxBackoff(maxBackoff)
        .build();
  }

  public PipelineSettings withStatusInterval(Duration interval) {
    return toBuilder().statusInterval(interval).build();
  }

  public PipelineSettings withMessages(boolean on) {
    return toBuilder().messages(on).build();
  }

  public PipelineSettings withStreaming(StreamingSettings s) {
    return toBuilder().streaming(s).build();
  }

  /** A builder holding these settings, to change some of them. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.name = name;
    b.slot = slot;
    b.publications = publications;
    b.startMode = startMode;
    b.excludedSchemas = excludedSchemas;
    b.failover = failover;
    b.maxCommandRetries = maxCommandRetries;
    b.maxSinkRetries = maxSinkRetries;
    b.minBackoff = minBackoff;
    b.maxBackoff = maxBackoff;
    b.handoverWindow = handoverWindow;
    b.inFlightWindow = inFlightWindow;
    b.batchMaxTransactions = batchMaxTransactions;
    b.batchMaxDelay = batchMaxDelay;
    b.maxTransactionChanges = maxTransactionChanges;
    b.statusInterval = statusInterval;
    b.messages = messages;
    b.streaming = streaming;
    b.snapshotBatchRows = snapshotBatchRows;
    b.incrementalAtStart = incrementalAtStart;
    b.incrementalMaxUnkeyedRows = incrementalMaxUnkeyedRows;
    return b;
  }

  /**
   * Mutable counterpart of {@link PipelineSettings}; start from {@link #of} and {@link #toBuilder}.
   */
  public static final class Builder {
    private String name;
    private String slot;
    private List<String> publications;
    private StartMode startMode;
    private List<String> excludedSchemas;
    private boolean failover;
    private int maxCommandRetries;
    private int maxSinkRetries;
    private Duration minBackoff;
    private Duration maxBackoff;
    private Duration handoverWindow;
    private int inFlightWindow;
    private int batchMaxTransactions;
    private Duration batchMaxDelay;
    private int maxTransactionChanges;
    private Duration statusInterval;
    private boolean messages;
    private StreamingSettings streaming;
    private int snapshotBatchRows;
    private boolean incrementalAtStart;
    private int incrementalMaxUnkeyedRows;

    private Builder() {}

    public Builder startMode(StartMode v) {
      startMode = v;
      return this;
    }

    public Builder excludedSchemas(List<String> v) {
      excludedSchemas = v;
      return this;
    }

    public Builder failover(boolean v) {
      failover = v;
      return this;
    }

    public Builder maxCommandRetries(int v) {
      maxCommandRetries = v;
      return this;
    }

    public Builder maxSinkRetries(int v) {
      maxSinkRetries = v;
      return this;
    }

    public Builder minBackoff(Duration v) {
      minBackoff = v;
      return this;
    }

    public Builder maxBackoff(Duration v) {
      maxBackoff = v;
      return this;
    }

    public Builder handoverWindow(Duration v) {
      handoverWindow = v;
      return this;
    }

    public Builder inFlightWindow(int v) {
      inFlightWindow = v;
      return this;
    }

    public Builder batchMaxTransactions(int v) {
      batchMaxTransactions = v;
      return this;
    }

    public Builder batchMaxDelay(Duration v) {
      batchMaxDelay = v;
      return this;
    }

    public Builder maxTransactionChanges(int v) {
      maxTransactionChanges = v;
      return this;
    }

    public Builder statusInterval(Duration v) {
      statusInterval = v;
      return this;
    }

    public Builder messages(boolean v) {
      messages = v;
      return this;
    }

    public Builder streaming(StreamingSettings v) {
      streaming = v;
      return this;
    }

    public Builder snapshotBatchRows(int v) {
      snapshotBatchRows = v;
      return this;
    }

    public Builder incrementalAtStart(boolean v) {
      incrementalAtStart = v;
      return this;
    }

    public Builder incrementalMaxUnkeyedRows(int v) {
      incrementalMaxUnkeyedRows = v;
      return this;
    }

    public PipelineSettings build() {
      return new PipelineSettings(
          name,
          slot,
          publications,
          startMode,
          excludedSchemas,
          failover,
          maxCommandRetries,
          maxSinkRetries,
          minBackoff,
          maxBackoff,
          handoverWindow,
          inFlightWindow,
          batchMaxTransactions,
          batchMaxDelay,
          maxTransactionChanges,
          statusInterval,
          messages,
          streaming,
          snapshotBatchRows,
          incrementalAtStart,
          incrementalMaxUnkeyedRows);
    }
  }

  /**
   * Checks every identifier that will reach SQL.
   *
   * @throws PipelineHaltException {@link HaltReason#INVALID_IDENTIFIER}, naming which setting is at
   *     fault and the expected shape, never the text
   */
  public void validate() {
    check("pipeline name", name);
    check("slot name", slot);
    if (publications.isEmpty()) {
      throw new PipelineHaltException(
          HaltReason.INVALID_IDENTIFIER, "at least one publication is required");
    }
    publications.forEach(p -> check("publication name", p));
    excludedSchemas.forEach(s -> check("excluded schema", s));
  }

  private static void check(String what, String identifier) {
    if (!Identifiers.isValid(identifier)) {
      throw new PipelineHaltException(
          HaltReason.INVALID_IDENTIFIER, what + " " + Identifiers.SHAPE);
    }
  }
}
