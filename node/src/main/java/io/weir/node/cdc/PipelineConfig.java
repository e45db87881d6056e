package io.weir.node.cdc;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigUtil;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.Identifiers;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.PostgresTls;
import io.weir.persistence.SettingsException;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.StreamingSettings;
import io.weir.persistence.cdc.mirror.MirrorSettings;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.cdc.source.StartMode;
import io.weir.sharding.cdc.PartitionSink;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * One pipeline declared under {@code weir.pipelines.<name>}, merged over {@code
 * weir.pipeline-defaults}. Errors name the full key, never a value.
 *
 * @param sourceUrl JDBC URL of the source database (default: Weir's own database)
 * @param sinkUrl JDBC URL of the mirror's target database (default: Weir's own database)
 * @param autostart start when the node's storage is ready
 * @param continuous whether the sink is the continuous-query engine ({@code sink.type =
 *     continuous})
 */
public record PipelineConfig(
    PipelineSettings settings,
    SourceSettings source,
    String sinkUrl,
    MirrorSettings mirror,
    FileSinkConfig file,
    PartitionSinkConfig partitions,
    boolean autostart,
    boolean continuous) {

  /**
   * The partition sink (null unless {@code sink.type = partitions}).
   *
   * @param collections table ({@code schema.table}) -> collection; unmapped tables keep their name
   * @param partitionKeys table -> partition-key columns (default: the document id columns)
   * @param idColumns table -> document id columns (default: the replica identity)
   */
  public record PartitionSinkConfig(
      Map<String, String> collections,
      Map<String, List<String>> partitionKeys,
      Map<String, List<String>> idColumns,
      int maxSliceRows,
      long maxSliceBytes,
      int maxInFlight,
      Duration askTimeout) {

    public PartitionSink.Settings settings(int partitions) {
      return new PartitionSink.Settings(
          partitions,
          collections,
          partitionKeys,
          idColumns,
          maxSliceRows,
          maxSliceBytes,
          maxInFlight,
          askTimeout);
    }
  }

  /**
   * Collections fed by this pipeline's partition sink that are named explicitly (others are {@code
   * schema.table}).
   */
  public Collection<String> mappedCollections() {
    return partitions == null ? List.of() : partitions.collections().values();
  }

  /**
   * The file sink under the library checkpoint store (null when the sink is the mirror).
   *
   * @param checkpointEvery checkpoint writes batch this many transactions (a crash repeats at most
   *     that many)
   * @param checkpointMaxDelay or wait at most this long after the first unstored one
   */
  public record FileSinkConfig(
      Path path,
      int checkpointEvery,
      Duration checkpointMaxDelay,
      int maxRetries,
      Duration retryBackoff) {}

  /** Every pipeline declared in {@code config}, sorted by name. */
  public static List<PipelineConfig> all(Config config) {
    List<PipelineConfig> out = new ArrayList<>();
    if (!config.hasPath("weir.pipelines")) {
      return out;
    }
    Set<String> slots = new HashSet<>();
    String continuous = null;
    for (String name : new TreeSet<>(config.getObject("weir.pipelines").keySet())) {
      PipelineConfig p = create(name, config);
      // Two pipelines on one slot would each confirm past the other's checkpoint.
      if (!slots.add(p.source().url() + "|" + p.settings().slot())) {
        throw new SettingsException(
            "weir.pipelines." + name + ".slot",
            "is already used by another pipeline on the same source");
      }
      if (p.continuous()) {
        // One engine per node consumes it; a second would see half of the transactions.
        if (continuous != null) {
          throw new SettingsException(
              "weir.pipelines." + name + ".sink.type",
              "continuous is already the sink of another pipeline; at most one pipeline feeds continuous queries");
        }
        continuous = name;
      }
      out.add(p);
    }
    return out;
  }

  static PipelineConfig create(String name, Config root) {
    String prefix = "weir.pipelines." + name;
    if (!Identifiers.isValid(name)) {
      throw new SettingsException(
          "weir.pipelines", "pipeline names " + Identifiers.SHAPE.replaceFirst("^must ", "must "));
    }
    Config c;
    try {
      c = root.getConfig(prefix).withFallback(root.getConfig("weir.pipeline-defaults"));
    } catch (ConfigException e) {
      throw new SettingsException(prefix, "must be an object of pipeline settings");
    }
    ConfigValues v = new ConfigValues(c.atPath(prefix), Map.of());
    String slot = v.requiredString(prefix + ".slot");
    if (!Identifiers.isValid(slot)) {
      throw new SettingsException(prefix + ".slot", Identifiers.SHAPE);
    }
    List<String> publications;
    try {
      publications = c.getStringList("publications");
    } catch (ConfigException e) {
      throw new SettingsException(prefix + ".publications", "must be a list of publication names");
    }
    if (publications.isEmpty() || !publications.stream().allMatch(Identifiers::isValid)) {
      throw new SettingsException(
          prefix + ".publications",
          "must list at least one publication; each "
              + Identifiers.SHAPE.replaceFirst("^must ", "must "));
    }
    StartModes modes = startModes(c, prefix + ".start-mode");
    MirrorSettings mirror = null;
    FileSinkConfig file = null;
    PartitionSinkConfig partitions = null;
    boolean continuous = false;
    try {
      String type = c.getString("sink.type");
      if (type.equals("continuous")) {
        continuous = true;
      } else if (type.equals("partitions")) {
        partitions = partitionSink(c, v, prefix);
      } else if (type.equals("file")) {
        String path = v.requiredString(prefix + ".sink.path");
        file =
            new FileSinkConfig(
                Path.of(path),
                v.positiveInt(prefix + ".sink.checkpoint.every"),
                v.positiveDuration(prefix + ".sink.checkpoint.max-delay"),
                v.nonNegativeInt(prefix + ".sink.checkpoint.max-retries"),
                v.positiveDuration(prefix + ".sink.checkpoint.retry-backoff"));
      } else if (type.equals("mirror")) {
        mirror = MirrorSettings.create(c.getConfig("sink"));
      } else {
        throw new SettingsException(
            prefix + ".sink.type", "must be partitions, mirror, file or continuous");
      }
    } catch (SettingsException e) {
      throw e.key().startsWith("weir.")
          ? e
          : new SettingsException(
              prefix + ".sink." + e.key(), e.getMessage().substring(e.key().length() + 2));
    } catch (ConfigException e) {
      throw new SettingsException(
          prefix + ".sink", "must be an object with type and target-schema");
    }
    List<String> excluded = new ArrayList<>(List.of(root.getString("weir.postgres.schema")));
    if (mirror != null) {
      excluded.add(mirror.targetSchema());
    }
    // The partition sink pipelines many slices per call; one transaction per call would leave it
    // idle.
    boolean batchSet = root.hasPath(prefix + ".batch.max-transactions");
    int batchMax =
        partitions != null && !batchSet ? 256 : v.positiveInt(prefix + ".batch.max-transactions");
    Duration batchDelay =
        partitions != null && !root.hasPath(prefix + ".batch.max-delay")
            ? Duration.ofMillis(10)
            : v.positiveDuration(prefix + ".batch.max-delay");
    PipelineSettings settings =
        PipelineSettings.of(name, slot, publications).toBuilder()
            .startMode(modes.slot())
            .incrementalAtStart(modes.incremental())
            .excludedSchemas(excluded)
            .failover(bool(c, prefix, "failover"))
            .maxCommandRetries(v.nonNegativeInt(prefix + ".max-command-retries"))
            .maxSinkRetries(v.nonNegativeInt(prefix + ".max-sink-retries"))
            .minBackoff(v.positiveDuration(prefix + ".min-backoff"))
            .maxBackoff(v.positiveDuration(prefix + ".max-backoff"))
            .handoverWindow(v.positiveDuration(prefix + ".handover-window"))
            .inFlightWindow(v.positiveInt(prefix + ".in-flight-window"))
            .batchMaxTransactions(batchMax)
            .batchMaxDelay(batchDelay)
            .maxTransactionChanges(v.positiveInt(prefix + ".max-transaction-changes"))
            .statusInterval(c.getDuration("status-interval"))
            // The continuous engine's fence messages (ADR 0042) reach it only with messages on.
            .messages(continuous || bool(c, prefix, "messages"))
            .streaming(streaming(c, v, prefix))
            .snapshotBatchRows(v.positiveInt(prefix + ".snapshot.batch-rows"))
            .incrementalMaxUnkeyedRows(v.positiveInt(prefix + ".snapshot.max-unkeyed-rows"))
            .build();
    String sourceUrl =
        c.hasPath("source.url") ? c.getString("source.url") : root.getString("weir.postgres.url");
    String sourceUser =
        c.hasPath("source.user")
            ? c.getString("source.user")
            : root.getString("weir.postgres.user");
    String sourcePassword =
        c.hasPath("source.password")
            ? c.getString("source.password")
            : root.getString("weir.postgres.password");
    String sinkUrl =
        c.hasPath("sink.url") ? c.getString("sink.url") : root.getString("weir.postgres.url");
    // TLS towards the source: its own source.tls when set (as a whole), else Weir's database's. The
    // mirror's target pool always uses weir.postgres.tls, like its login.
    PostgresTls weirTls = PostgresSettings.tls(root);
    PostgresTls sourceTls =
        c.hasPath("source.tls") ? PostgresTls.create(v, prefix + ".source.tls") : weirTls;
    sourceTls.checkUrl(
        c.hasPath("source.url") ? prefix + ".source.url" : "weir.postgres.url", sourceUrl);
    weirTls.checkUrl(c.hasPath("sink.url") ? prefix + ".sink.url" : "weir.postgres.url", sinkUrl);
    return new PipelineConfig(
        settings,
        new SourceSettings(sourceUrl, sourceUser, sourcePassword, sourceTls),
        sinkUrl,
        mirror,
        file,
        partitions,
        bool(c, prefix, "autostart"),
        continuous);
  }

  /**
   * {@code sink { collections, partition-keys, id-columns, slice { max-rows, max-bytes },
   * max-in-flight, ask-timeout }}.
   */
  private static PartitionSinkConfig partitionSink(Config c, ConfigValues v, String prefix) {
    Map<String, String> collections = new TreeMap<>();
    if (c.hasPath("sink.collections")) {
      for (Map.Entry<String, ConfigValue> e : c.getObject("sink.collections").entrySet()) {
        Object name = e.getValue().unwrapped();
        if (!(name instanceof String n) || !n.matches("[A-Za-z0-9_.-]{1,128}")) {
          throw new SettingsException(
              prefix + ".sink.collections",
              "maps tables (schema.table) to collection names of 1 to 128 letters, digits, '_', '-' or '.'");
        }
        collections.put(e.getKey(), n);
      }
    }
    long sliceBytes = v.bytes(prefix + ".sink.slice.max-bytes", 1024);
    if (sliceBytes > PartitionSink.MESSAGE_BYTES) {
      throw new SettingsException(
          prefix + ".sink.slice.max-bytes",
          "must be at most 1MiB: a slice's part travels in one message to its partition");
    }
    return new PartitionSinkConfig(
        collections,
        columnLists(c, prefix, "partition-keys"),
        columnLists(c, prefix, "id-columns"),
        v.positiveInt(prefix + ".sink.slice.max-rows"),
        sliceBytes,
        v.positiveInt(prefix + ".sink.max-in-flight"),
        v.positiveDuration(prefix + ".sink.ask-timeout"));
  }

  private static Map<String, List<String>> columnLists(Config c, String prefix, String key) {
    Map<String, List<String>> out = new TreeMap<>();
    if (!c.hasPath("sink." + key)) {
      return out;
    }
    for (String table : c.getObject("sink." + key).keySet()) {
      List<String> columns;
      try {
        columns =
            c.getObject("sink." + key).toConfig().getStringList(ConfigUtil.quoteString(table));
      } catch (ConfigException e) {
        throw new SettingsException(
            prefix + ".sink." + key, "maps tables (schema.table) to lists of column names");
      }
      if (columns.isEmpty()) {
        throw new SettingsException(prefix + ".sink." + key, "lists at least one column per table");
      }
      out.put(table, List.copyOf(columns));
    }
    return out;
  }

  /**
   * {@code streaming { enabled, decoding-work-mem, spill { directory, memory-bound, max-bytes } }}.
   */
  private static StreamingSettings streaming(Config c, ConfigValues v, String prefix) {
    boolean enabled = bool(c, prefix, "streaming.enabled");
    String workMem = v.optionalString(prefix + ".streaming.decoding-work-mem");
    int workMemKb = 0;
    if (workMem != null && !workMem.isBlank()) {
      // HOCON's kB is 1000 bytes, PostgreSQL's 1024: accept "64kB" as the server's minimum and
      // round up to whole KiB.
      long bytes =
          v.bytes(
              prefix + ".streaming.decoding-work-mem",
              StreamingSettings.MIN_DECODING_WORK_MEM_KB * 1000L);
      long kb = Math.max(StreamingSettings.MIN_DECODING_WORK_MEM_KB, (bytes + 1023) / 1024);
      if (kb > Integer.MAX_VALUE) {
        throw new SettingsException(prefix + ".streaming.decoding-work-mem", "is too large");
      }
      workMemKb = (int) kb;
    }
    String directory = v.optionalString(prefix + ".streaming.spill.directory");
    long memoryBound = v.bytes(prefix + ".streaming.spill.memory-bound", 1);
    long maxBytes = v.bytes(prefix + ".streaming.spill.max-bytes", 1);
    Path spill = null;
    if (directory != null && !directory.isBlank()) {
      try {
        spill = Path.of(directory);
      } catch (InvalidPathException e) {
        throw new SettingsException(
            prefix + ".streaming.spill.directory", "must be a file system path");
      }
    }
    return new StreamingSettings(enabled, workMemKb, spill, memoryBound, maxBytes);
  }

  private static final String START_MODES =
      "must be go-forward, resume, snapshot or incremental, or a list of them";

  /** What {@code start-mode} asks for: a slot policy and whether to backfill incrementally. */
  record StartModes(StartMode slot, boolean incremental) {}

  /**
   * {@code start-mode}: one mode, or a list. At most one slot policy: go-forward, resume and
   * snapshot contradict each other (go-forward streams from now on, snapshot first copies what
   * exists), so naming two is refused; {@code incremental} adds a backfill of every published table
   * to go-forward (the default) or resume, and is refused next to snapshot, which already copies
   * everything.
   */
  static StartModes startModes(Config c, String key) {
    List<String> names;
    try {
      names =
          c.getValue("start-mode").valueType() == ConfigValueType.LIST
              ? c.getStringList("start-mode")
              : List.of(c.getString("start-mode"));
    } catch (ConfigException e) {
      throw new SettingsException(key, START_MODES);
    }
    List<String> policies = new ArrayList<>();
    boolean incremental = false;
    for (String name : names) {
      switch (name) {
        case "go-forward", "resume", "snapshot" -> {
          if (!policies.contains(name)) {
            policies.add(name);
          }
        }
        case "incremental" -> incremental = true;
        default -> throw new SettingsException(key, START_MODES);
      }
    }
    if (policies.isEmpty() && !incremental) {
      throw new SettingsException(key, START_MODES);
    }
    if (policies.size() > 1) {
      throw new SettingsException(
          key,
          "conflicting start modes: "
              + String.join(" and ", policies)
              + " cannot be combined (go-forward streams from now on, resume needs an existing slot, snapshot first copies the existing rows)");
    }
    if (incremental && policies.contains("snapshot")) {
      throw new SettingsException(
          key,
          "conflicting start modes: snapshot and incremental cannot be combined (snapshot already copies every table)");
    }
    StartMode slot =
        policies.isEmpty()
            ? StartMode.GO_FORWARD
            : StartMode.valueOf(policies.get(0).toUpperCase(Locale.ROOT).replace('-', '_'));
    return new StartModes(slot, incremental);
  }

  private static boolean bool(Config c, String prefix, String key) {
    try {
      return c.getBoolean(key);
    } catch (ConfigException e) {
      throw new SettingsException(prefix + "." + key, "must be true or false");
    }
  }

  public String name() {
    return settings.name();
  }
}
