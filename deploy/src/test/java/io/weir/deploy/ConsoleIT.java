package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The operator console in a real browser: headless Chromium loads {@code /console} from a node of a
 * real 2-node cluster with a streaming pipeline into 8 partitions (whose outboxes are full, so the
 * pipeline lags), a halted pipeline and a projection consumer, and signs in with the admin token
 * (handed over as {@code #token=...}, which the page takes once and removes). The DOM after 15 s of
 * virtual time must show both member addresses, the placement of every partition on one of them,
 * the lag chart as an SVG path of several samples of {@code GET /admin/slots} that rises above zero
 * (the slot's lag is positive), the halted pipeline with its reason, the consumer's checkpoints and
 * one outbox row per partition, with no script error, no request error and no refusal by the
 * Content-Security-Policy. Without a token, and with a wrong one, the page shows the sign-in form
 * and no cluster data. A screenshot is kept in {@code deploy/target/e2e-logs/console.png}.
 */
class ConsoleIT extends EndToEndTest {
  private static final int PARTITIONS = 8;
  private static final int QUOTA = 30;
  private static final String ROW_CANARY = "ROWCANARY5e1d";

  /** The chart's plot area ends at this y (its zero line); see renderLagChart in console.js. */
  private static final double ZERO_LINE = 214.0;

  private static final int VIRTUAL_MILLIS = 15_000;
  private final ObjectMapper json = new ObjectMapper();

  @Test
  void theConsoleShowsMembersPlacementLagHaltsConsumersAndOutboxes() throws Exception {
    Path artifacts = NodeProcess.logs();
    Files.createDirectories(artifacts);
    try (HeadlessChromium chromium =
        HeadlessChromium.find(Files.createTempDirectory("weir-console-"))) {
      drive(chromium, artifacts);
    }
  }

  private void drive(HeadlessChromium chromium, Path artifacts) throws Exception {

    db = TestPostgres.server().freshDatabase("console");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.src (id bigint PRIMARY KEY, note text NOT NULL)");
      s.execute("CREATE PUBLICATION console_pub FOR TABLE public.src");
    }
    String suffix = db.name().substring(db.name().length() - 10);
    Path config = Files.createTempFile("weir-console", ".conf");
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.partitions.count = " + PARTITIONS,
            "weir.partitions.outbox.max-entries = " + QUOTA,
            "weir.pipelines.src {",
            "  slot = console_src_" + suffix,
            "  publications = [console_pub]",
            "  min-backoff = 200ms",
            "  max-backoff = 1s",
            "  max-command-retries = 1000",
            "  sink { type = partitions, collections { \"public.src\" = src } }",
            "}",
            // Its publication does not exist: it halts (publication-missing) at its first start.
            "weir.pipelines.orphan { slot = console_orphan_"
                + suffix
                + ", publications = [console_missing_pub],"
                + " sink.target-schema = console_orphan }"));
    int seed1 = NodeProcess.freePort();
    int seed2 = NodeProcess.freePort();
    String seeds = "127.0.0.1:" + seed1 + ",127.0.0.1:" + seed2;
    for (int port : new int[] {seed1, seed2}) {
      nodes.add(
          NodeProcess.start(
              new NodeProcess.Spec("console-" + nodes.size())
                  .database(db)
                  .clusterPort(port)
                  .env("WEIR_SEED_NODES", seeds)
                  .args("--config", config.toString())
                  // The second node joins after the first started every partition; rebalance
                  // quickly.
                  .prop("pekko.cluster.sharding.rebalance-interval", "1s")));
    }
    NodeProcess node = nodes.get(0);
    Set<String> addresses = new HashSet<>();
    nodes.forEach(n -> addresses.add(n.clusterAddress()));
    await("2 members up, every partition running, half on each node")
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(300))
        .until(
            () ->
                nodes.stream().allMatch(NodeProcess::ready)
                    && node.memberStatuses().keySet().equals(addresses)
                    && node.partitions()
                        .map(
                            p ->
                                p.get("running").asInt() == PARTITIONS
                                    && p.get("byNode").size() == 2
                                    && java.util.stream.StreamSupport.stream(
                                            p.get("byNode").spliterator(), false)
                                        .allMatch(n -> n.asInt() == PARTITIONS / 2))
                        .orElse(false));
    awaitRunning(node, "src");
    await("the orphan pipeline halts")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(300))
        .until(
            () ->
                node.pipeline("orphan")
                    .map(p -> p.get("state").asText().equals("halted"))
                    .orElse(false));
    assertThat(node.pipelineNow("orphan").get("reason").asText()).isEqualTo("publication-missing");

    insert(1, 20);
    await("the first rows reach the partitions")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(300))
        .until(() -> outboxEntries(node).values().stream().mapToLong(Long::longValue).sum() >= 20);
    // A projection consumer on the two partitions with the most entries; on the first it commits a
    // batch.
    List<Integer> fullest =
        outboxEntries(node).entrySet().stream()
            .sorted(Map.Entry.<Integer, Long>comparingByValue().reversed())
            .limit(2)
            .map(Map.Entry::getKey)
            .toList();
    // Configuring the same consumer again, reading and committing the same batch are idempotent
    // (docs/projections.md): retried while the node does not answer.
    for (int p : fullest) {
      call(
          () -> node,
          "POST",
          "/admin/projections/configure",
          "{\"partition\":" + p + ",\"consumer\":\"audit\",\"generation\":1}");
    }
    JsonNode batch =
        call(
            () -> node,
            "POST",
            "/admin/projections/read",
            "{\"partition\":" + fullest.get(0) + ",\"consumer\":\"audit\",\"generation\":1}");
    JsonNode committed =
        call(
            () -> node,
            "POST",
            "/admin/projections/commit",
            "{\"token\":\"" + batch.get("token").asText() + "\"}");
    long checkpoint = committed.get("checkpoint").asLong();
    assertThat(checkpoint).as("the consumer's checkpoint moved").isPositive();

    // More rows than the outboxes hold: the pipeline waits for room and lags.
    insert(21, 20 + PARTITIONS * QUOTA + 40);
    await("the slot lags behind the full outboxes")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(300))
        .until(() -> slot(node, "src").path("lagBytes").asLong() > 10_000);
    assertThat(slot(node, "orphan").get("exists").asBoolean())
        .as("the orphan never created its slot")
        .isFalse();

    String base = "http://127.0.0.1:" + node.httpPort() + "/console";

    // No token: the sign-in form, no data.
    HeadlessChromium.Run anonymous = chromium.run(base, 5_000, "--dump-dom");
    assertThat(anonymous.exit()).as("chromium: %s", tail(anonymous.stderr())).isZero();
    assertThat(anonymous.stdout())
        .contains("data-state=\"signed-out\"")
        .contains("id=\"login-form\"");
    addresses.forEach(
        a ->
            assertThat(anonymous.stdout())
                .as("no member address without a token")
                .doesNotContain(a));

    // A wrong token: refused by the node (401), the page says so and shows nothing else.
    String wrong = "not-the-admin-token-7b2c";
    HeadlessChromium.Run refused = chromium.run(base + "#token=" + wrong, 5_000, "--dump-dom");
    assertThat(refused.stdout()).contains("data-state=\"signed-out\"");
    assertThat(text(refused.stdout(), "login-error")).as("the sign-in error").contains("401");
    addresses.forEach(a -> assertThat(refused.stdout()).doesNotContain(a));
    assertThat(refused.stdout()).doesNotContain(wrong);

    // The admin token: every panel filled.
    String url = base + "#token=" + NodeProcess.ADMIN_TOKEN;
    HeadlessChromium.Run signedIn = chromium.run(url, VIRTUAL_MILLIS, "--dump-dom");
    String dom = signedIn.stdout();
    Files.writeString(artifacts.resolve("console-dom.html"), dom);
    assertThat(signedIn.exit()).as("chromium: %s", tail(signedIn.stderr())).isZero();
    assertThat(dom).as("signed in").contains("data-state=\"signed-in\"");
    assertThat(text(dom, "script-errors")).as("no script error").isEmpty();
    assertThat(text(dom, "fetch-errors")).as("no failed admin request").isEmpty();
    assertThat(signedIn.consoleLines()).as("nothing logged by the page, no CSP refusal").isEmpty();
    assertThat(dom)
        .as("the token is not put into the page")
        .doesNotContain(NodeProcess.ADMIN_TOKEN);
    assertThat(dom).as("no row value").doesNotContain(ROW_CANARY);

    // Members, and where each partition runs.
    for (String a : addresses) {
      assertThat(dom)
          .as("member %s listed", a)
          .contains("<td class=\"mono member-address\">" + a + "</td>");
    }
    List<Map<String, String>> cells =
        tags(dom, "rect").stream().filter(t -> t.containsKey("data-partition")).toList();
    assertThat(cells).as("one placement cell per partition").hasSize(PARTITIONS);
    assertThat(cells.stream().map(t -> t.get("fill")).distinct().count())
        .as("partitions drawn on both members")
        .isEqualTo(2);
    assertThat(cells)
        .as("no partition drawn as not running")
        .noneMatch(t -> t.get("fill").equals("#cbd5e1"));

    // The lag chart: a path of the samples taken every 3 s, above the zero line where the lag is.
    Map<String, String> line =
        tags(dom, "path").stream()
            .filter(t -> "lag-line".equals(t.get("class")) && "src".equals(t.get("data-pipeline")))
            .findFirst()
            .orElseThrow(() -> new AssertionError("no lag line for pipeline src in the DOM"));
    List<double[]> points = points(line.get("d"));
    System.out.printf("console: lag line of %d points: %s%n", points.size(), line.get("d"));
    assertThat(points)
        .as("samples over %d ms of virtual time", VIRTUAL_MILLIS)
        .hasSizeGreaterThanOrEqualTo(3);
    assertThat(Integer.parseInt(line.get("data-points"))).isEqualTo(points.size());
    for (int i = 1; i < points.size(); i++) {
      assertThat(points.get(i)[0]).as("samples in time order").isGreaterThan(points.get(i - 1)[0]);
    }
    assertThat(points).as("the lag is drawn above zero").anyMatch(p -> p[1] < ZERO_LINE - 1);
    assertThat(tags(dom, "path").stream().filter(t -> "lag-line".equals(t.get("class"))).count())
        .as("one line per existing slot: the orphan pipeline never created one")
        .isEqualTo(1);

    // The halted pipeline and its reason.
    assertThat(section(dom, "halted-rows")).contains(">orphan<").contains(">publication-missing<");
    // Consumers and their checkpoints; every partition's outbox.
    String consumers = section(dom, "consumer-rows");
    assertThat(Pattern.compile(">audit<").matcher(consumers).results().count())
        .as("audit on 2 partitions")
        .isEqualTo(2);
    assertThat(consumers).contains(">" + checkpoint + "<");
    assertThat(Pattern.compile("<tr>").matcher(section(dom, "outbox-rows")).results().count())
        .as("one outbox row per partition")
        .isEqualTo(PARTITIONS);
    assertThat(text(dom, "outbox-summary")).contains("Quota per partition: " + QUOTA + " entries");

    // The screenshot, kept as a test artifact.
    Path png = artifacts.resolve("console.png");
    Files.deleteIfExists(png);
    HeadlessChromium.Run shot =
        chromium.run(url, VIRTUAL_MILLIS, "--window-size=1360,1900", "--screenshot=" + png);
    assertThat(shot.exit()).as("chromium: %s", tail(shot.stderr())).isZero();
    assertThat(shot.consoleLines()).isEmpty();
    byte[] image = Files.readAllBytes(png);
    assertThat(image.length).as("a real picture").isGreaterThan(20_000);
    assertThat(java.util.Arrays.copyOf(image, 8))
        .as("a PNG")
        .isEqualTo(new byte[] {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'});
    int width = ByteBuffer.wrap(image, 16, 4).getInt();
    int height = ByteBuffer.wrap(image, 20, 4).getInt();
    assertThat(width).isEqualTo(1360);
    assertThat(height).isEqualTo(1900);
    System.out.printf(
        "console: screenshot %s (%d bytes, %dx%d)%n", png, image.length, width, height);

    // The files themselves: types and the policy (the browser enforced it above).
    HttpResponse<String> page =
        node.sendIdempotent("GET", "/console", null, Map.of("Authorization", "None"));
    assertThat(page.statusCode()).isEqualTo(200);
    assertThat(page.headers().firstValue("Content-Type")).hasValue("text/html; charset=UTF-8");
    assertThat(page.headers().firstValue("Content-Security-Policy").orElseThrow())
        .contains("script-src 'self'")
        .doesNotContain("unsafe-inline");
  }

  private void insert(int from, int to) throws Exception {
    try (Connection c = db.connect();
        PreparedStatement ps = c.prepareStatement("INSERT INTO public.src VALUES (?, ?)")) {
      for (int i = from; i <= to; i++) {
        ps.setLong(1, i);
        ps.setString(2, ROW_CANARY + " row " + i);
        ps.executeUpdate();
      }
    }
  }

  /** A pipeline's slot in {@code GET /admin/slots}. */
  private JsonNode slot(NodeProcess node, String pipeline) throws Exception {
    HttpResponse<String> r = node.getUntil("/admin/slots", true);
    assertThat(r.statusCode()).as("slots: %s", r.body()).isEqualTo(200);
    for (JsonNode s : json.readTree(r.body()).get("slots")) {
      if (s.get("pipeline").asText().equals(pipeline)) {
        return s;
      }
    }
    throw new AssertionError("no slot for pipeline " + pipeline + " in " + r.body());
  }

  /** Retained outbox entries per partition. */
  private Map<Integer, Long> outboxEntries(NodeProcess node) throws Exception {
    Map<Integer, Long> out = new HashMap<>();
    HttpResponse<String> r = node.get("/admin/outbox/status", true).orElse(null);
    if (r == null || r.statusCode() == 503) {
      return out; // a partition moving between nodes; asked again
    }
    assertThat(r.statusCode()).as("outbox status: %s", r.body()).isEqualTo(200);
    for (JsonNode p : json.readTree(r.body())) {
      out.put(p.get("partition").asInt(), p.get("outboxEntries").asLong());
    }
    return out;
  }

  /** The text inside the element with {@code id} (which holds no other element). */
  private static String text(String dom, String id) {
    Matcher m = Pattern.compile("id=\"" + id + "\"[^>]*>([^<]*)<").matcher(dom);
    assertThat(m.find()).as("element #%s in the DOM", id).isTrue();
    return m.group(1).trim();
  }

  /** The markup inside the {@code tbody} with {@code id}. */
  private static String section(String dom, String id) {
    Matcher m =
        Pattern.compile("<tbody id=\"" + id + "\">(.*?)</tbody>", Pattern.DOTALL).matcher(dom);
    assertThat(m.find()).as("tbody #%s in the DOM", id).isTrue();
    return m.group(1);
  }

  /** The attributes of every {@code <name ...>} start tag. */
  private static List<Map<String, String>> tags(String dom, String name) {
    List<Map<String, String>> out = new ArrayList<>();
    Matcher tag = Pattern.compile("<" + name + "\\s([^>]*)>").matcher(dom);
    Pattern attr = Pattern.compile("([a-zA-Z-]+)=\"([^\"]*)\"");
    while (tag.find()) {
      Map<String, String> attrs = new HashMap<>();
      Matcher a = attr.matcher(tag.group(1));
      while (a.find()) {
        attrs.put(a.group(1), a.group(2));
      }
      out.add(attrs);
    }
    return out;
  }

  /** The points of an SVG path made of M and L commands. */
  private static List<double[]> points(String d) {
    List<double[]> out = new ArrayList<>();
    Matcher m = Pattern.compile("([ML])(-?[0-9.]+) (-?[0-9.]+)").matcher(d);
    while (m.find()) {
      out.add(new double[] {Double.parseDouble(m.group(2)), Double.parseDouble(m.group(3))});
    }
    assertThat(d.replaceAll("[ML]-?[0-9.]+ -?[0-9.]+", "").trim())
        .as("only M/L commands in %s", d)
        .isEmpty();
    return out;
  }

  private static String tail(String s) {
    return s.length() > 3000 ? s.substring(s.length() - 3000) : s;
  }
}
