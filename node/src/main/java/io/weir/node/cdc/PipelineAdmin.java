package io.weir.node.cdc;

import io.weir.persistence.cdc.CdcPipeline;
import io.weir.persistence.cdc.PipelineStatus;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.AskPattern;

/**
 * Pipeline operations for the admin API, asked of the cluster-singleton {@link PipelineManager}.
 */
public final class PipelineAdmin {
  private static final Duration TIMEOUT = Duration.ofSeconds(10);
  private static final Duration DROP_TIMEOUT = Duration.ofSeconds(30);

  private final ActorRef<PipelineManager.Command> manager;
  private final ActorSystem<?> system;
  private final Set<String> names;

  public PipelineAdmin(
      ActorRef<PipelineManager.Command> manager,
      ActorSystem<?> system,
      List<PipelineConfig> pipelines) {
    this.manager = manager;
    this.system = system;
    this.names = new TreeSet<>(pipelines.stream().map(PipelineConfig::name).toList());
  }

  /** The configured pipeline names (the same on every node). */
  public boolean exists(String name) {
    return names.contains(name);
  }

  public CompletionStage<PipelineManager.PipelineList> list() {
    return AskPattern.ask(manager, PipelineManager.ListAll::new, TIMEOUT, system.scheduler());
  }

  public CompletionStage<PipelineStatus> status(String name) {
    return AskPattern.ask(
        manager, r -> new PipelineManager.Get(name, r), TIMEOUT, system.scheduler());
  }

  public CompletionStage<PipelineStatus> start(String name) {
    return AskPattern.ask(
        manager, r -> new PipelineManager.Start(name, r), TIMEOUT, system.scheduler());
  }

  public CompletionStage<PipelineStatus> stop(String name) {
    return AskPattern.ask(
        manager, r -> new PipelineManager.Stop(name, r), TIMEOUT, system.scheduler());
  }

  /**
   * Drops the pipeline's slot and records (stopped or halted pipelines only). Longer timeout: the
   * drop waits for the previous run's last sink call and retries while the slot is still active.
   */
  public CompletionStage<CdcPipeline.DropReply> drop(String name) {
    return AskPattern.ask(
        manager, r -> new PipelineManager.Drop(name, r), DROP_TIMEOUT, system.scheduler());
  }

  /** How the pipeline's sink would handle each published table (reads catalogs, writes nothing). */
  public CompletionStage<CdcPipeline.CheckReply> check(String name) {
    return AskPattern.ask(
        manager, r -> new PipelineManager.Check(name, r), TIMEOUT, system.scheduler());
  }

  public CompletionStage<CdcPipeline.SnapshotReply> snapshot(String name, List<String> tables) {
    return AskPattern.ask(
        manager, r -> new PipelineManager.Snapshot(name, tables, r), TIMEOUT, system.scheduler());
  }
}
