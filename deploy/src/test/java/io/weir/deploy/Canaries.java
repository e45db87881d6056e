package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * The canary strings a test seeds into a node's inputs (row values, document ids, bodies, query
 * parameters, filter values, cursors, tokens, headers), the error answers the node gave, and the
 * scan of every surface for them: the node's whole log, every error answer (status, headers and
 * body), {@code GET /metrics}, {@code /admin/metrics} and the admin status routes. A canary is
 * {@code CANARY-<kind>-<12 random hex digits>} (or {@code canary_<kind>_<hex>} where only an
 * identifier is accepted); a surface leaks it when it holds the canary in any letter case, or its
 * random tail alone (a value cut short), or its base64 form (a message's content), or the word
 * {@code CANARY} in capitals at all.
 */
final class Canaries {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final SecureRandom RANDOM = new SecureRandom();

  /** Admin routes whose replies are status, not data: none may show a client's value. */
  static final List<String> ADMIN_STATUS =
      List.of(
          "/admin/cluster",
          "/admin/partitions",
          "/admin/outbox/status",
          "/admin/outbox/settings",
          "/admin/pipelines",
          "/admin/slots",
          "/admin/tokens/keys",
          "/admin/principals",
          "/admin/policies",
          "/admin/metrics",
          "/metrics");

  private final String test;
  private final Map<String, String> canaries = new LinkedHashMap<>(); // canary -> kind
  private final List<String> errorAnswers = new ArrayList<>();
  private final List<String> otherTexts = new ArrayList<>();
  private final Map<String, Integer> codes = new TreeMap<>();

  Canaries(String test) {
    this.test = test;
  }

  /** A new canary {@code CANARY-<kind>-<hex>}. */
  String next(String kind) {
    String c = "CANARY-" + kind + "-" + hex();
    canaries.put(c, kind);
    return c;
  }

  /** A new canary shaped as a lower-case SQL identifier: {@code canary_<kind>_<hex>}. */
  String identifier(String kind) {
    String c = "canary_" + kind + "_" + hex();
    canaries.put(c, kind);
    return c;
  }

  private static String hex() {
    byte[] b = new byte[6];
    RANDOM.nextBytes(b);
    return HexFormat.of().formatHex(b);
  }

  List<String> all() {
    return List.copyOf(canaries.keySet());
  }

  /**
   * Checks that {@code r} is the refusal expected ({@code status} and typed {@code code}, the
   * node's JSON error body) and keeps it for the scan; returns it.
   */
  HttpResponse<String> refused(String what, HttpResponse<String> r, int status, String code) {
    assertThat(r.statusCode()).as("%s: %s", what, r.body()).isEqualTo(status);
    JsonNode body;
    try {
      body = JSON.readTree(r.body());
    } catch (IOException e) {
      throw new AssertionError(what + ": the error body is not JSON: " + r.body(), e);
    }
    assertThat(body.path("error").asText()).as("%s: %s", what, r.body()).isEqualTo(code);
    assertThat(body.path("message").isTextual()).as("%s has a message", what).isTrue();
    keepError(what, r);
    codes.merge(status + " " + code, 1, Integer::sum);
    return r;
  }

  /** Keeps an error answer (any status of 400 or more) for the scan without checking its code. */
  void keepError(String what, HttpResponse<String> r) {
    assertThat(r.statusCode()).as("%s is an error answer: %s", what, r.body()).isGreaterThan(399);
    errorAnswers.add(what + " -> " + r.statusCode() + " " + r.headers().map() + " " + r.body());
  }

  /** Keeps another text the node gave out that must hold no canary (a status body, say). */
  void keep(String what, String text) {
    otherTexts.add(what + ": " + text);
  }

  /** The error answers kept, by status and code. */
  Map<String, Integer> codes() {
    return Map.copyOf(codes);
  }

  int errorAnswers() {
    return errorAnswers.size();
  }

  /**
   * Every log file {@code node} wrote in {@link NodeProcess#logs()} (the current one and any a lost
   * bind race moved aside).
   */
  static String logs(NodeProcess node) {
    StringBuilder out = new StringBuilder(node.log());
    try (Stream<Path> files = Files.list(NodeProcess.logs())) {
      for (Path f : files.toList()) {
        if (f.getFileName().toString().startsWith(node.name() + ".bind-failure-")) {
          out.append('\n').append(Files.readString(f));
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /**
   * The scan: the logs of every node in {@code all}, every error answer kept, every other text
   * kept, and the admin status routes of {@code live} ({@link #ADMIN_STATUS}, each pipeline's
   * status among {@code pipelines}) read now. Fails listing every hit (surface and canary kind).
   * Prints one summary line.
   */
  void assertNoLeak(NodeProcess live, List<NodeProcess> all, List<String> pipelines) {
    assertThat(canaries).as("canaries were seeded").isNotEmpty();
    Map<String, String> surfaces = new LinkedHashMap<>();
    for (NodeProcess n : all) {
      String log = logs(n);
      assertThat(log).as("the log of %s is read", n.name()).isNotBlank();
      surfaces.put("log of " + n.name(), log);
    }
    for (String path : ADMIN_STATUS) {
      surfaces.put("GET " + path, answer(live, path));
    }
    for (String p : pipelines) {
      surfaces.put("GET /admin/pipelines/" + p, answer(live, "/admin/pipelines/" + p));
    }
    for (int i = 0; i < errorAnswers.size(); i++) {
      surfaces.put("error answer " + i, errorAnswers.get(i));
    }
    for (int i = 0; i < otherTexts.size(); i++) {
      surfaces.put("kept text " + i, otherTexts.get(i));
    }
    List<String> hits = new ArrayList<>();
    long chars = 0;
    for (Map.Entry<String, String> s : surfaces.entrySet()) {
      chars += s.getValue().length();
      for (String found : found(s.getValue())) {
        hits.add(s.getKey() + " holds " + found);
      }
    }
    System.out.printf(
        "%s: canaries=%d surfaces=%d (logs=%d, admin=%d, error-answers=%d, other=%d) chars=%d"
            + " refusals=%s hits=%d%n",
        test,
        canaries.size(),
        surfaces.size(),
        all.size(),
        ADMIN_STATUS.size() + pipelines.size(),
        errorAnswers.size(),
        otherTexts.size(),
        chars,
        codes,
        hits.size());
    assertThat(hits).as("no client-supplied or row value on any surface").isEmpty();
  }

  /**
   * What of the canaries {@code text} holds by the scan's rules (each canary in any letter case,
   * its random tail, its base64 forms, the word CANARY): the scan's own check, also run on texts
   * that hold canaries by design (a query's rows, the file sink's file) to show it finds them.
   */
  List<String> found(String text) {
    List<String> out = new ArrayList<>();
    String lower = text.toLowerCase(Locale.ROOT);
    for (Map.Entry<String, String> c : canaries.entrySet()) {
      String canary = c.getKey();
      String tail = canary.substring(canary.length() - 12);
      byte[] bytes = canary.getBytes(StandardCharsets.UTF_8);
      if (lower.contains(canary.toLowerCase(Locale.ROOT))
          || lower.contains(tail)
          || text.contains(Base64.getEncoder().withoutPadding().encodeToString(bytes))
          || text.contains(Base64.getUrlEncoder().withoutPadding().encodeToString(bytes))) {
        out.add("the " + c.getValue() + " canary " + canary);
      }
    }
    if (text.contains("CANARY")) {
      out.add("the word CANARY");
    }
    return out;
  }

  /** An admin route's 200 body, asked again until the node answers. */
  private static String answer(NodeProcess node, String path) {
    HttpResponse<String> r = node.getUntil(path, true);
    assertThat(r.statusCode()).as("GET %s: %s", path, r.body()).isEqualTo(200);
    assertThat(r.body()).as("GET %s answers something", path).isNotBlank();
    return r.body();
  }
}
