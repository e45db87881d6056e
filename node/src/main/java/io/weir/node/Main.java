package io.weir.node;

import com.typesafe.config.Config;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.SettingsException;
import java.nio.file.Path;
import org.apache.pekko.actor.CoordinatedShutdown;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** The {@code weir} command line. */
@Command(
    name = "weir",
    mixinStandardHelpOptions = true,
    versionProvider = Main.Version.class,
    description = "Weir: a clustered change-stream processor for PostgreSQL.",
    subcommands = {Main.NodeCommand.class})
public final class Main implements Runnable {
  /** Exit status for a configuration error. */
  public static final int EXIT_CONFIG = 2;
  /** Exit status when the node cannot start (e.g. its HTTP port is taken). */
  public static final int EXIT_START = 3;
  /** Exit status when the cluster downed this node (e.g. the minority side of a partition). */
  public static final int EXIT_DOWNED = 4;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  public static void main(String[] args) {
    int code = new CommandLine(new Main()).execute(args);
    System.exit(code);
  }

  @Override
  public void run() {
    spec.commandLine().usage(System.err);
  }

  /** {@code weir node}: runs a node until it is stopped (SIGTERM) or removed from the cluster. */
  @Command(name = "node", mixinStandardHelpOptions = true, description = "Run a Weir node.")
  static final class NodeCommand implements Callable<Integer> {
    @Option(
        names = "--config",
        paramLabel = "FILE",
        description = "HOCON file with weir.* settings; overrides environment variables and defaults.")
    Path configFile;

    @Override
    public Integer call() {
      Config config;
      NodeSettings settings;
      try {
        config = NodeConfig.load(configFile);
        settings = NodeSettings.create(config);
      } catch (SettingsException e) {
        System.err.println("weir: configuration error: " + e.getMessage());
        return EXIT_CONFIG;
      }
      WeirNode node;
      try {
        node = WeirNode.start(config, settings);
      } catch (SettingsException e) {
        // A TLS file that changed between the settings check and its use.
        System.err.println("weir: configuration error: " + e.getMessage());
        return EXIT_CONFIG;
      } catch (WeirNode.NodeStartException e) {
        if (e.refusedByStorage()) {
          System.err.println("weir: configuration error: " + e.getMessage());
          return EXIT_CONFIG;
        }
        System.err.println("weir: " + e.getMessage() + " (" + SafeErrors.describe(e.getCause()) + ")");
        return EXIT_START;
      }
      node.system().getWhenTerminated().toCompletableFuture().join();
      CoordinatedShutdown.Reason reason = CoordinatedShutdown.get(node.system()).getShutdownReason().orElse(null);
      if (reason == WeirNode.StorageRefused.INSTANCE
          && node.storageStatus() instanceof io.weir.persistence.StorageStatus.Refused refused) {
        System.err.println("weir: configuration error: " + refused.reason());
        return EXIT_CONFIG;
      }
      if (reason instanceof CoordinatedShutdown.ClusterDowningReason$) {
        System.err.println("weir: this node was removed from the cluster (downed) and has stopped");
        return EXIT_DOWNED;
      }
      return 0;
    }
  }

  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String v = Main.class.getPackage().getImplementationVersion();
      return new String[] {"weir " + (v == null ? "development build" : v)};
    }
  }
}
