package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.node.Main;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import javax.net.ssl.SSLContext;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine.Spec;

/**
 * {@code weir ctl}: operates a running node through its admin HTTP API. The node's address and the
 * administrator's token come from options or the environment ({@code WEIR_URL} or {@code
 * WEIR_HTTP_PORT}, {@code WEIR_ADMIN_TOKEN}); replies are shown as tables, or as the node's JSON
 * with {@code --json}.
 *
 * <p>Exit status: {@value #EXIT_OK} done; {@value #EXIT_REFUSED} the node refused the request (its
 * typed error printed as {@code <code>: <message>} on stderr) or an awaited operation failed;
 * {@value #EXIT_USAGE} a usage error; {@value #EXIT_UNREACHABLE} the node could not be reached.
 */
@Command(
    name = "ctl",
    mixinStandardHelpOptions = true,
    versionProvider = CtlCommand.Version.class,
    description = "Operate a Weir node through its admin HTTP API.",
    subcommands = {
      ClusterCommands.class,
      PipelineCommands.class,
      OutboxCommands.class,
      DocumentCommands.class,
      PartitionCommands.class,
      ProjectionCommands.class,
      PrincipalCommands.class,
      GrantCommands.class
    },
    footerHeading = "%nExit status:%n",
    footer = {
      "  0  done",
      "  1  refused by the node (stderr: <code>: <message>), or an awaited",
      "     operation failed",
      "  2  usage error",
      "  3  the node could not be reached (refused, unknown host, TLS, timeout)"
    })
public final class CtlCommand implements Callable<Integer> {
  public static final int EXIT_OK = 0;
  public static final int EXIT_REFUSED = 1;
  public static final int EXIT_USAGE = 2;
  public static final int EXIT_UNREACHABLE = 3;

  /** Where a node listens unless told otherwise (weir.http.port's default). */
  public static final String DEFAULT_URL = "http://127.0.0.1:8080";

  static final int DEFAULT_TIMEOUT_SECONDS = 30;

  @ParentCommand Main main;
  @Spec CommandSpec spec;

  @Option(
      names = "--url",
      scope = ScopeType.INHERIT,
      paramLabel = "URL",
      description =
          "Node address, http(s)://host:port (default: $WEIR_URL, else http://127.0.0.1:$WEIR_HTTP_PORT, "
              + "else "
              + DEFAULT_URL
              + ").")
  String url;

  @Option(
      names = "--token",
      scope = ScopeType.INHERIT,
      paramLabel = "TOKEN",
      description =
          "Administrator's bearer token (default: $WEIR_ADMIN_TOKEN). Visible to other users in the "
              + "process list: prefer the environment or --token-file.")
  String token;

  @Option(
      names = "--token-file",
      scope = ScopeType.INHERIT,
      paramLabel = "FILE",
      description = "File holding the bearer token (default: $WEIR_ADMIN_TOKEN_FILE).")
  Path tokenFile;

  @Option(
      names = "--json",
      scope = ScopeType.INHERIT,
      description = "Print the node's JSON reply (errors too) on stdout instead of tables.")
  boolean json;

  @Option(
      names = "--ca-cert",
      scope = ScopeType.INHERIT,
      paramLabel = "FILE",
      description =
          "For https: trust the certificates of this PEM file, the node's or its CA's (default: "
              + "$WEIR_CA_CERT, else the JVM's trust store).")
  Path caCert;

  @Option(
      names = "--insecure",
      scope = ScopeType.INHERIT,
      description = "For https: accept any certificate for any host name (testing only).")
  boolean insecure;

  @Option(
      names = "--timeout",
      scope = ScopeType.INHERIT,
      paramLabel = "SECONDS",
      description =
          "Wait at most this long for each reply (default: " + DEFAULT_TIMEOUT_SECONDS + ").")
  Integer timeoutSeconds;

  private AdminClient client;

  @Override
  public Integer call() {
    spec.commandLine().usage(spec.commandLine().getErr());
    return EXIT_USAGE;
  }

  Map<String, String> environment() {
    return main == null ? System.getenv() : main.environment();
  }

  PrintWriter out() {
    return spec.commandLine().getOut();
  }

  PrintWriter err() {
    return spec.commandLine().getErr();
  }

  boolean json() {
    return json;
  }

  /** Whether progress may be redrawn in place: stderr is a terminal. */
  boolean terminal() {
    return System.console() != null;
  }

  /** Prints a reply's JSON as the node sent it. */
  void printJson(AdminClient.Reply reply) {
    out().println(reply.body().strip());
    out().flush();
  }

  /**
   * The client for this invocation; usage errors (a bad URL, an unreadable file) are exit status 2.
   */
  AdminClient client() {
    if (client != null) {
      return client;
    }
    Map<String, String> env = environment();
    // On a node's own host (docker exec, the systemd environment file) its port is known.
    String local =
        env.get("WEIR_HTTP_PORT") == null || env.get("WEIR_HTTP_PORT").isEmpty()
            ? DEFAULT_URL
            : "http://127.0.0.1:" + env.get("WEIR_HTTP_PORT");
    String address = url != null ? url : nonEmpty(env.get("WEIR_URL"), local);
    URI base;
    try {
      base = new URI(address);
    } catch (URISyntaxException e) {
      throw usage("--url must be http(s)://host:port");
    }
    if (base.getScheme() == null
        || !(base.getScheme().equals("http") || base.getScheme().equals("https"))
        || base.getHost() == null
        || base.getRawQuery() != null
        || base.getRawFragment() != null
        || base.getRawUserInfo() != null) {
      throw usage(
          "--url must be http(s)://host:port (got a URL without http/https scheme or host, or with a query, "
              + "fragment or user info)");
    }
    String bearer = token;
    if (bearer == null) {
      Path file = tokenFile;
      if (file == null
          && env.get("WEIR_ADMIN_TOKEN_FILE") != null
          && !env.get("WEIR_ADMIN_TOKEN_FILE").isEmpty()) {
        file = Path.of(env.get("WEIR_ADMIN_TOKEN_FILE"));
      }
      if (file != null) {
        try {
          bearer = Files.readString(file, StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
          throw usage(
              "cannot read the token file " + file + " (" + e.getClass().getSimpleName() + ")");
        }
      } else {
        bearer = env.get("WEIR_ADMIN_TOKEN");
      }
    }
    SSLContext tls = null;
    Path ca =
        caCert != null
            ? caCert
            : (nonEmpty(env.get("WEIR_CA_CERT"), null) == null
                ? null
                : Path.of(env.get("WEIR_CA_CERT")));
    if (insecure && ca != null) {
      throw usage("--insecure and --ca-cert exclude each other");
    }
    try {
      if (insecure) {
        tls = AdminClient.trustingAnything();
        err()
            .println(
                "weir: warning: --insecure: the node's certificate and host name are not checked");
      } else if (ca != null) {
        tls = AdminClient.trusting(ca);
      }
    } catch (IOException | GeneralSecurityException e) {
      throw usage("cannot use the CA certificate file " + ca + " (" + e.getMessage() + ")");
    }
    int seconds = timeoutSeconds == null ? DEFAULT_TIMEOUT_SECONDS : timeoutSeconds;
    if (seconds < 1) {
      throw usage("--timeout must be at least 1 second");
    }
    Duration timeout = Duration.ofSeconds(seconds);
    Duration connect =
        timeout.compareTo(Duration.ofSeconds(10)) < 0 ? timeout : Duration.ofSeconds(10);
    client = new AdminClient(base, bearer, tls, connect, timeout);
    return client;
  }

  CommandLine.ParameterException usage(String message) {
    return new CommandLine.ParameterException(spec.commandLine(), message);
  }

  private static String nonEmpty(String value, String fallback) {
    return value == null || value.isEmpty() ? fallback : value;
  }

  /**
   * The execution exception handler of the {@code weir} command line: a {@link CtlFailure} prints
   * its line on stderr (and the node's error body on stdout with {@code --json}) and exits with its
   * status; anything else under {@code ctl} is a bug, reported in one line, status 1. Failures of
   * other commands get picocli's default handling.
   */
  public static int handleFailure(
      Exception e, CommandLine commandLine, CommandLine.ParseResult parseResult) throws Exception {
    CtlCommand ctl = find(commandLine);
    if (ctl == null) {
      throw e; // not weir ctl (weir node): picocli's default, the stack trace and status 1
    }
    if (e instanceof CtlFailure f) {
      if (ctl != null && ctl.json && f.body() != null) {
        commandLine.getOut().println(f.body().strip());
        commandLine.getOut().flush();
      }
      commandLine.getErr().println(f.getMessage());
      commandLine.getErr().flush();
      return f.exitCode();
    }
    commandLine
        .getErr()
        .println(
            "internal: unexpected "
                + e.getClass().getName()
                + (e.getMessage() == null ? "" : ": " + e.getMessage()));
    commandLine.getErr().flush();
    return EXIT_REFUSED;
  }

  private static CtlCommand find(CommandLine commandLine) {
    for (CommandLine c = commandLine; c != null; c = c.getParent()) {
      if (c.getCommand() instanceof CtlCommand ctl) {
        return ctl;
      }
    }
    return null;
  }

  /** Text of a JSON field, or null when absent or null. */
  static String text(JsonNode node, String field) {
    JsonNode v = node.get(field);
    return v == null || v.isNull() ? null : v.asText();
  }

  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String v = CtlCommand.class.getPackage().getImplementationVersion();
      return new String[] {"weir " + (v == null ? "development build" : v)};
    }
  }
}
