package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedTrustManager;

/**
 * A client of one node's admin HTTP API ({@code /admin/*}) for {@code weir ctl}: JSON requests with
 * the bearer token, replies as JSON. A reply other than 2xx becomes {@link CtlFailure#refused}, a
 * node that cannot be reached (refused connection, unknown host, TLS handshake, timeout) {@link
 * CtlFailure#unreachable}. Nothing here writes the token anywhere.
 */
public final class AdminClient {
  static final ObjectMapper JSON = new ObjectMapper();

  private final URI base;
  private final String token;
  private final HttpClient http;
  private final Duration timeout;

  /**
   * @param base the node's address, {@code http(s)://host:port} (a path prefix is kept)
   * @param token the administrator's bearer token, or null to send none
   * @param tls the TLS context for https, or null for the JVM's default trust store
   */
  public AdminClient(
      URI base, String token, SSLContext tls, Duration connectTimeout, Duration timeout) {
    String b = base.toString();
    this.base = URI.create(b.endsWith("/") ? b.substring(0, b.length() - 1) : b);
    this.token = token;
    this.timeout = timeout;
    HttpClient.Builder builder =
        HttpClient.newBuilder().connectTimeout(connectTimeout).version(HttpClient.Version.HTTP_1_1);
    if (tls != null) {
      builder.sslContext(tls);
    }
    this.http = builder.build();
  }

  public URI base() {
    return base;
  }

  /** A JSON reply of 2xx: its status, raw text and parsed tree. */
  public record Reply(int status, String body, JsonNode json) {}

  public Reply get(String path) {
    return send("GET", path, null);
  }

  public Reply post(String path, Object body) {
    return send("POST", path, body);
  }

  /** A GET whose JSON reply is returned whatever its status (readiness answers 503 with JSON). */
  public Reply getAnyStatus(String path) {
    return send("GET", path, null, true);
  }

  /** {@code body}: null for none, a String sent as is, anything else written as JSON. */
  public Reply send(String method, String path, Object body) {
    return send(method, path, body, false);
  }

  /** {@link #send(String, String, Object)} with extra request headers. */
  public Reply send(String method, String path, Object body, Map<String, String> headers) {
    return send(method, path, body, false, headers);
  }

  private Reply send(String method, String path, Object body, boolean anyStatus) {
    return send(method, path, body, anyStatus, Map.of());
  }

  private Reply send(
      String method, String path, Object body, boolean anyStatus, Map<String, String> headers) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(base + path))
            .timeout(timeout)
            .header("Accept", "application/json");
    headers.forEach(request::header);
    if (token != null && !token.isEmpty()) {
      request.header("Authorization", "Bearer " + token);
    }
    if (body == null) {
      request.method(method, HttpRequest.BodyPublishers.noBody());
    } else {
      String text;
      try {
        text = body instanceof String s ? s : JSON.writeValueAsString(body);
      } catch (IOException e) {
        throw new IllegalStateException("cannot encode a request body", e);
      }
      request
          .header("Content-Type", "application/json")
          .method(method, HttpRequest.BodyPublishers.ofString(text));
    }
    HttpResponse<String> response;
    try {
      response =
          http.send(request.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw CtlFailure.unreachable(base, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw CtlFailure.unreachable(base, e);
    }
    JsonNode tree = parse(response.body());
    if (response.statusCode() / 100 != 2 && !(anyStatus && tree != null)) {
      throw CtlFailure.refused(response.statusCode(), tree, response.body());
    }
    if (tree == null) {
      throw CtlFailure.unexpected(response.statusCode());
    }
    return new Reply(response.statusCode(), response.body(), tree);
  }

  private static JsonNode parse(String body) {
    if (body == null || body.isBlank()) {
      return null;
    }
    try {
      return JSON.readTree(body);
    } catch (IOException e) {
      return null;
    }
  }

  /** One path segment, percent-encoded. */
  public static String segment(String value) {
    return URLEncoder.encode(value, StandardCharsets.UTF_8).replace("+", "%20");
  }

  /** A TLS context trusting the certificates of a PEM (or DER) file, the node's or its CA's. */
  public static SSLContext trusting(Path caFile) throws IOException, GeneralSecurityException {
    Collection<? extends Certificate> certificates;
    try (InputStream in = Files.newInputStream(caFile)) {
      certificates = CertificateFactory.getInstance("X.509").generateCertificates(in);
    } catch (CertificateException e) {
      throw new CertificateException("the file holds no readable X.509 certificate");
    }
    if (certificates.isEmpty()) {
      throw new CertificateException("the file holds no X.509 certificate");
    }
    KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
    store.load(null, null);
    int i = 0;
    for (Certificate c : certificates) {
      store.setCertificateEntry("ca-" + i++, c);
    }
    TrustManagerFactory factory =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    factory.init(store);
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(null, factory.getTrustManagers(), null);
    return context;
  }

  /**
   * A TLS context that accepts any certificate for any host ({@code --insecure}). An {@link
   * X509ExtendedTrustManager} is also where JSSE checks the host name, so this skips that too.
   */
  public static SSLContext trustingAnything() throws GeneralSecurityException {
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(null, new TrustManager[] {new AnyCertificate()}, null);
    return context;
  }

  private static final class AnyCertificate extends X509ExtendedTrustManager {
    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket) {}

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket) {}

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine) {}

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine) {}

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType) {}

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType) {}

    @Override
    public X509Certificate[] getAcceptedIssuers() {
      return new X509Certificate[0];
    }
  }
}
