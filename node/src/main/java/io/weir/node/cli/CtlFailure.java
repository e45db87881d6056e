package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.ConnectException;
import java.net.URI;
import java.net.UnknownHostException;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpTimeoutException;
import java.nio.channels.UnresolvedAddressException;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;

/**
 * Why a {@code weir ctl} command failed, with its exit status: {@link CtlCommand#EXIT_REFUSED} when
 * the node answered with an error (printed as {@code <code>: <message>}), {@link
 * CtlCommand#EXIT_UNREACHABLE} when it could not be reached. {@code body}, when not null, is the
 * node's error reply, printed on stdout with {@code --json}.
 */
public final class CtlFailure extends RuntimeException {
  private final int exitCode;
  private final String body;
  private final String code;

  private CtlFailure(int exitCode, String code, String line, String body) {
    super(line, null, false, false);
    this.exitCode = exitCode;
    this.code = code;
    this.body = body;
  }

  public int exitCode() {
    return exitCode;
  }

  /** The error code of the node's reply ({@code forbidden}, {@code not-found}, ...), or null. */
  public String code() {
    return code;
  }

  /** The node's error reply as it came, or null. */
  public String body() {
    return body;
  }

  /** An error reply: {@code <error>: <message>} from a typed error body, else the HTTP status. */
  static CtlFailure refused(int status, JsonNode tree, String body) {
    if (tree != null && tree.isObject() && tree.path("error").isTextual()) {
      String code = tree.get("error").asText();
      String message = tree.path("message").asText("");
      String line = code + ": " + message;
      if (tree.path("retryable").asBoolean(false)) {
        line += " (retryable)";
      }
      if (status == 409 && tree.has("actualRevision")) {
        line += " (actual revision " + tree.get("actualRevision").asText() + ")";
      }
      return new CtlFailure(CtlCommand.EXIT_REFUSED, code, line, body);
    }
    // Not a Weir error body (e.g. a proxy's page): only the status, never the text.
    return new CtlFailure(
        CtlCommand.EXIT_REFUSED,
        null,
        "http-" + status + ": the reply is not a Weir error body",
        null);
  }

  /** A 2xx reply that is not JSON. */
  static CtlFailure unexpected(int status) {
    return new CtlFailure(
        CtlCommand.EXIT_REFUSED,
        null,
        "unexpected-reply: HTTP " + status + " without a JSON body (is the URL a Weir node?)",
        null);
  }

  /**
   * The operation was accepted but ended badly (a snapshot that failed, a pipeline that halted).
   */
  static CtlFailure failed(String code, String message, String body) {
    return new CtlFailure(CtlCommand.EXIT_REFUSED, code, code + ": " + message, body);
  }

  static CtlFailure unreachable(URI base, Throwable cause) {
    return new CtlFailure(
        CtlCommand.EXIT_UNREACHABLE,
        "unreachable",
        "unreachable: cannot reach the node at " + base + " (" + describe(cause) + ")",
        null);
  }

  /**
   * What went wrong with the connection, in a few words (exception messages name hosts and TLS
   * causes, no data).
   */
  static String describe(Throwable t) {
    StringBuilder out = new StringBuilder();
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    for (Throwable c = t; c != null && seen.add(c); c = c.getCause()) {
      String what = null;
      if (c instanceof HttpConnectTimeoutException) {
        what = "connection timed out";
      } else if (c instanceof HttpTimeoutException) {
        what = "no reply within the timeout (--timeout)";
      } else if (c instanceof ConnectException) {
        what = "connection refused";
      } else if (c instanceof UnresolvedAddressException || c instanceof UnknownHostException) {
        what = "unknown host";
      } else if (c instanceof SSLHandshakeException) {
        what = "TLS handshake failed (" + message(c) + ")";
      } else if (c instanceof SSLException) {
        what = "TLS failed (" + message(c) + ")";
      } else if (c instanceof InterruptedException) {
        what = "interrupted";
      }
      if (what != null && out.indexOf(what) < 0) {
        if (out.length() > 0) {
          out.append("; ");
        }
        out.append(what);
        if (c instanceof SSLException) {
          break;
        }
      }
    }
    return out.length() == 0
        ? t.getClass().getSimpleName() + (t.getMessage() == null ? "" : " (" + t.getMessage() + ")")
        : out.toString();
  }

  private static String message(Throwable t) {
    String m = t.getMessage();
    return m == null ? t.getClass().getSimpleName() : m;
  }
}
