package io.weir.node;

import com.typesafe.config.Config;
import io.weir.node.cli.CtlCommand;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.SettingsException;
import io.weir.persistence.StorageStatus;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.pekko.actor.CoordinatedShutdown;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The {@code weir} command line: {@code weir node} runs a node, {@code weir ctl ...} operates one
 * through its admin HTTP API ({@link CtlCommand}, docs/cli.md). There is no default command: a bare
 * {@code weir} prints the usage and exits with status 2 (ADR 0017).
 */
@Command(
    name = "weir",
    mixinStandardHelpOptions = true,
    versionProvider = Main.Version.class,
    description = "Weir: a clustered change-stream processor for PostgreSQL.",
    subcommands = {Main.NodeCommand.class, CtlCommand.class})
public final class Main implements Callable<Integer> {
  /** Exit status for a configuration error. */
  public static final int EXIT_CONFIG = 2;

  /** Exit status when the node cannot start (e.g. its HTTP port is taken). */
  public static final int EXIT_START = 3;

  /** Exit status when the cluster downed this node (e.g. the minority side of a partition). */
  public static final int EXIT_DOWNED = 4;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  private final Map<String, String> environment;

  /**
   * @param environment where {@code weir ctl} reads WEIR_URL, WEIR_ADMIN_TOKEN, ... (tests pass
   *     their own)
   */
  public Main(Map<String, String> environment) {
    this.environment = Map.copyOf(environment);
  }

  /** The environment the command line was started with. */
  public Map<String, String> environment() {
    return environment;
  }

  public static void main(String[] args) {
    int code =
        args.length > 0 && args[0].equals("node")
            ? nodeCommandLine().execute(Arrays.copyOfRange(args, 1, args.length))
            : commandLine(System.getenv()).execute(args);
    System.exit(code);
  }

  /**
   * {@code weir node} alone: the same command, options and exit statuses as through {@link
   * #commandLine}, without building the model of every {@code weir ctl} subcommand first (half a
   * second of a node's start on an idle machine: picocli's classes predate the class-data archive
   * format and are verified on each start, and the ctl tree is read by reflection).
   */
  static CommandLine nodeCommandLine() {
    CommandLine cli = new CommandLine(new NodeCommand()).setCommandName("weir node");
    unsorted(cli);
    return cli;
  }

  /**
   * The whole command line, ready to {@code execute}: usage errors exit with status 2, {@code weir
   * ctl} failures with the status {@link CtlCommand} documents.
   */
  public static CommandLine commandLine(Map<String, String> environment) {
    CommandLine cli = new CommandLine(new Main(environment));
    cli.setExecutionExceptionHandler(CtlCommand::handleFailure);
    unsorted(cli);
    return cli;
  }

  /** Help lists a command's own options first, then the shared ones, as declared. */
  private static void unsorted(CommandLine cli) {
    cli.getCommandSpec().usageMessage().sortOptions(false);
    cli.getSubcommands().values().forEach(Main::unsorted);
  }

  @Override
  public Integer call() {
    spec.commandLine().usage(spec.commandLine().getErr());
    return CommandLine.ExitCode.USAGE;
  }

  /** {@code weir node}: runs a node until it is stopped (SIGTERM) or removed from the cluster. */
  @Command(name = "node", mixinStandardHelpOptions = true, description = "Run a Weir node.")
  static final class NodeCommand implements Callable<Integer> {
    @Option(
        names = "--config",
        paramLabel = "FILE",
        description =
            "HOCON file with weir.* settings; overrides environment variables and defaults.")
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
        System.err.println(
            "weir: " + e.getMessage() + " (" + SafeErrors.describe(e.getCause()) + ")");
        return EXIT_START;
      }
      node.system().getWhenTerminated().toCompletableFuture().join();
      CoordinatedShutdown.Reason reason =
          CoordinatedShutdown.get(node.system()).getShutdownReason().orElse(null);
      if (reason == WeirNode.StorageRefused.INSTANCE
          && node.storageStatus() instanceof StorageStatus.Refused refused) {
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
