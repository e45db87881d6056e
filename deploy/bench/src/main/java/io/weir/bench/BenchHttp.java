package io.weir.bench;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;

/**
 * The benchmark's HTTP clients: one instance per client thread, each request waits for its answer.
 * {@code plain} keeps one HTTP/1.1 connection open per client and writes and reads the protocol
 * itself, as load generators such as wrk do, so that the clients (which share the machine with the
 * node and PostgreSQL) cost little CPU; {@code jdk} is {@link HttpClient}, which costs about 150 µs
 * of CPU per request on this machine's cores (docs/benchmarks.md). Both send the same requests.
 */
interface BenchHttp extends AutoCloseable {

  /** An answer: its status and body. */
  record Answer(int status, byte[] body) {
    String text() {
      return new String(body, StandardCharsets.UTF_8);
    }
  }

  /** Sends {@code method uri} with a JSON body and the bearer token; waits for the whole answer. */
  Answer send(String method, URI uri, String jsonBody, Duration timeout) throws IOException;

  @Override
  void close();

  /** A client of the kind the option names ({@code plain} or {@code jdk}). */
  static BenchHttp of(String kind, String token) {
    return switch (kind) {
      case "plain" -> new Plain(token);
      case "jdk" -> new Jdk(token);
      default -> throw new IllegalArgumentException("unknown HTTP client kind " + kind);
    };
  }

  /** {@link HttpClient} over HTTP/1.1; its pool keeps connections alive between requests. */
  final class Jdk implements BenchHttp {
    private final HttpClient http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5))
            .build();
    private final String token;

    Jdk(String token) {
      this.token = token;
    }

    @Override
    public Answer send(String method, URI uri, String jsonBody, Duration timeout)
        throws IOException {
      HttpRequest request =
          HttpRequest.newBuilder(uri)
              .timeout(timeout)
              .header("Authorization", "Bearer " + token)
              .header("Content-Type", "application/json")
              .method(method, HttpRequest.BodyPublishers.ofString(jsonBody))
              .build();
      try {
        HttpResponse<byte[]> r = http.send(request, HttpResponse.BodyHandlers.ofByteArray());
        return new Answer(r.statusCode(), r.body());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted", e);
      }
    }

    @Override
    public void close() {
      // HttpClient has no close before Java 21; its threads are daemons.
    }
  }

  /**
   * One keep-alive HTTP/1.1 connection, opened on first use and again after the server closed it (a
   * request that finds the reused connection closed before any answer byte is sent once more on a
   * new one). Answers with Content-Length or chunked bodies.
   */
  final class Plain implements BenchHttp {
    private final String token;
    private Socket socket;
    private InputStream in;
    private OutputStream out;
    private String hostPort;

    Plain(String token) {
      this.token = token;
    }

    @Override
    public Answer send(String method, URI uri, String jsonBody, Duration timeout)
        throws IOException {
      byte[] body = jsonBody.getBytes(StandardCharsets.UTF_8);
      String target = uri.getRawPath() + (uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery());
      String authority = uri.getHost() + ":" + uri.getPort();
      byte[] head =
          (method
                  + ' '
                  + target
                  + " HTTP/1.1\r\nHost: "
                  + authority
                  + "\r\nAuthorization: Bearer "
                  + token
                  + "\r\nContent-Type: application/json\r\nContent-Length: "
                  + body.length
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.ISO_8859_1);
      boolean reused = socket != null && authority.equals(hostPort);
      if (!reused) {
        connect(uri, authority, timeout);
      }
      socket.setSoTimeout((int) timeout.toMillis());
      try {
        return exchange(head, body);
      } catch (EOFException | java.net.SocketException e) {
        if (!reused) {
          close();
          throw e;
        }
        // The server closed the idle connection: once more on a new one.
        connect(uri, authority, timeout);
        socket.setSoTimeout((int) timeout.toMillis());
        try {
          return exchange(head, body);
        } catch (IOException again) {
          close();
          throw again;
        }
      } catch (IOException e) {
        close();
        throw e;
      }
    }

    private void connect(URI uri, String authority, Duration timeout) throws IOException {
      close();
      Socket s = new Socket();
      s.setTcpNoDelay(true);
      s.connect(new InetSocketAddress(uri.getHost(), uri.getPort()), (int) timeout.toMillis());
      socket = s;
      in = new BufferedInputStream(s.getInputStream(), 16 * 1024);
      out = s.getOutputStream();
      hostPort = authority;
    }

    private Answer exchange(byte[] head, byte[] body) throws IOException {
      byte[] request = new byte[head.length + body.length];
      System.arraycopy(head, 0, request, 0, head.length);
      System.arraycopy(body, 0, request, head.length, body.length);
      out.write(request);
      out.flush();
      String status = line();
      if (status == null) {
        throw new EOFException("connection closed before an answer");
      }
      String[] parts = status.split(" ", 3);
      if (parts.length < 2 || !parts[0].startsWith("HTTP/1.")) {
        throw new IOException("not an HTTP/1.x status line");
      }
      int code = Integer.parseInt(parts[1]);
      long length = -1;
      boolean chunked = false;
      boolean closeAfter = false;
      for (String h = line(); h != null && !h.isEmpty(); h = line()) {
        int colon = h.indexOf(':');
        if (colon < 0) {
          continue;
        }
        String name = h.substring(0, colon).trim().toLowerCase(Locale.ROOT);
        String value = h.substring(colon + 1).trim();
        switch (name) {
          case "content-length" -> length = Long.parseLong(value);
          case "transfer-encoding" -> chunked = value.toLowerCase(Locale.ROOT).contains("chunked");
          case "connection" -> closeAfter = value.equalsIgnoreCase("close");
          default -> {}
        }
      }
      byte[] answer;
      if (chunked) {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        for (; ; ) {
          String size = line();
          if (size == null) {
            throw new EOFException("connection closed inside a chunked answer");
          }
          int semi = size.indexOf(';');
          int n = Integer.parseInt((semi < 0 ? size : size.substring(0, semi)).trim(), 16);
          if (n == 0) {
            for (String t = line(); t != null && !t.isEmpty(); t = line()) {
              // trailers: ignored
            }
            break;
          }
          all.write(in.readNBytes(n));
          line();
        }
        answer = all.toByteArray();
      } else if (length >= 0) {
        answer = in.readNBytes((int) length);
        if (answer.length < length) {
          throw new EOFException("connection closed inside an answer");
        }
      } else {
        answer = in.readAllBytes();
        closeAfter = true;
      }
      if (closeAfter) {
        close();
      }
      return new Answer(code, answer);
    }

    /** One header line without its CRLF; null at the end of the stream before any byte. */
    private String line() throws IOException {
      StringBuilder b = new StringBuilder(64);
      for (; ; ) {
        int c = in.read();
        if (c < 0) {
          if (b.length() == 0) {
            return null;
          }
          throw new EOFException("connection closed inside a line");
        }
        if (c == '\n') {
          int end = b.length();
          if (end > 0 && b.charAt(end - 1) == '\r') {
            b.setLength(end - 1);
          }
          return b.toString();
        }
        b.append((char) c);
      }
    }

    @Override
    public void close() {
      if (socket != null) {
        try {
          socket.close();
        } catch (IOException e) {
          // closing: nothing to do
        }
      }
      socket = null;
      in = null;
      out = null;
      hostPort = null;
    }
  }
}
