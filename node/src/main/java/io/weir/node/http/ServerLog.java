package io.weir.node.http;

import io.weir.persistence.SafeErrors;
import org.apache.pekko.event.LoggingAdapter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The log of the node's HTTP server layer (Pekko HTTP's connection handling, {@link
 * NodeHttpServer}), on the logger {@code io.weir.node.http.ServerLog}. Pekko's messages there quote
 * requests: the URI of a request answered early or timed out, the request line of a response stream
 * that failed, illegal header values. So none of their text is written; each message Pekko 1.3.0 is
 * known to write becomes a fixed sentence, any other one a fixed sentence saying a message was
 * withheld, and an attached exception only its value-free description ({@link SafeErrors}: class
 * names). DEBUG is off.
 */
final class ServerLog implements LoggingAdapter {
  private static final Logger log = LoggerFactory.getLogger(ServerLog.class);

  /** Known messages, by how they start, and what is written instead. */
  private static final String[][] KNOWN = {
    {
      "Sending an 2xx 'early' response",
      "a 2xx response was sent before the request body was read; the connection is closed after it"
    },
    {"Response stream for", "a response stream failed; the connection was aborted"},
    {"Internal server error", "the HTTP layer failed to produce a response and answered 500"},
    {
      "Request timeout encountered",
      "a request got no response within pekko.http.server.request-timeout; answered 503"
    },
    {"Illegal request", "a request was refused as not valid HTTP"},
    {"Illegal header", "a request header that is not valid was ignored"},
    {"Illegal character", "a request header with an illegal character was refused"},
    {"Header key contains illegal character", "a header name with an illegal character was seen"},
    {"Could not materialize handling flow", "the handler of a new connection could not start"},
    {"Explicitly set HTTP header", "a response header the HTTP layer sets itself was ignored"},
  };

  /** The fixed sentence for {@code message}: never any of its text. */
  static String describe(String message) {
    if (message != null) {
      for (String[] k : KNOWN) {
        if (message.startsWith(k[0])) {
          return k[1];
        }
      }
    }
    return "the HTTP server reported a problem (its text is withheld: it may quote a request)";
  }

  @Override
  public boolean isErrorEnabled() {
    return log.isErrorEnabled();
  }

  @Override
  public boolean isWarningEnabled() {
    return log.isWarnEnabled();
  }

  @Override
  public boolean isInfoEnabled() {
    return log.isInfoEnabled();
  }

  @Override
  public boolean isDebugEnabled() {
    return false;
  }

  @Override
  public void notifyError(String message) {
    log.error(describe(message));
  }

  @Override
  public void notifyError(Throwable cause, String message) {
    log.error("{}: {}", describe(message), SafeErrors.describe(cause));
  }

  @Override
  public void notifyWarning(String message) {
    log.warn(describe(message));
  }

  @Override
  public void notifyWarning(Throwable cause, String message) {
    log.warn("{}: {}", describe(message), SafeErrors.describe(cause));
  }

  @Override
  public void notifyInfo(String message) {
    log.info(describe(message));
  }

  @Override
  public void notifyDebug(String message) {}
}
