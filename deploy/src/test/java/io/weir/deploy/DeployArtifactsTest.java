package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * Static checks of the deployment artifacts (no cluster, no Docker, no kubectl): every YAML
 * document under deploy/k8s parses and is a named Kubernetes object, the StatefulSet's probes,
 * ports and environment agree with what the node reads, the RBAC grants bootstrap needs, the
 * Dockerfile and the systemd unit start the node, and every script under deploy/bin (and the weir
 * wrapper) passes {@code bash -n}.
 */
class DeployArtifactsTest {
  private static Path repo;
  private static Map<String, Map<String, Object>> byKindAndName;
  private static List<Map<String, Object>> documents;

  @BeforeAll
  static void load() throws IOException {
    Path dir = Path.of("").toAbsolutePath();
    while (dir != null && !Files.isDirectory(dir.resolve("deploy/k8s"))) dir = dir.getParent();
    assertThat(dir).as("repository root holding deploy/k8s").isNotNull();
    repo = dir;
    documents = new ArrayList<>();
    byKindAndName = new LinkedHashMap<>();
    for (Path file : yamlFiles()) {
      Yaml yaml = new Yaml(new SafeConstructor(new LoaderOptions()));
      for (Object doc : yaml.loadAll(Files.readString(file))) {
        if (doc == null) continue;
        assertThat(doc).as(file + ": each document is a mapping").isInstanceOf(Map.class);
        Map<String, Object> m = cast(doc);
        m.put("__file", repo.relativize(file).toString());
        documents.add(m);
      }
    }
    for (Map<String, Object> d : documents) {
      Object meta = d.get("metadata");
      if (meta instanceof Map<?, ?> mm && mm.get("name") != null) {
        byKindAndName.put(d.get("kind") + "/" + mm.get("name"), d);
      }
    }
  }

  private static List<Path> yamlFiles() throws IOException {
    try (Stream<Path> s = Files.walk(repo.resolve("deploy/k8s"))) {
      return s.filter(p -> p.toString().endsWith(".yaml") || p.toString().endsWith(".yml"))
          .sorted()
          .toList();
    }
  }

  @SuppressWarnings("unchecked")
  private static <T> T cast(Object o) {
    return (T) o;
  }

  private static Map<String, Object> map(Object o, String what) {
    assertThat(o).as(what).isInstanceOf(Map.class);
    return cast(o);
  }

  private static List<Object> list(Object o, String what) {
    assertThat(o).as(what).isInstanceOf(List.class);
    return cast(o);
  }

  private static Map<String, Object> object(String kind, String name) {
    Map<String, Object> d = byKindAndName.get(kind + "/" + name);
    assertThat(d).as(kind + " " + name + " in deploy/k8s").isNotNull();
    return d;
  }

  /**
   * The environment variables the node reads: every {@code ${?WEIR_...}} of the modules'
   * reference.conf.
   */
  static Set<String> nodeEnvironment() throws IOException {
    Set<String> names = new TreeSet<>();
    Pattern p = Pattern.compile("\\$\\{\\?(WEIR_[A-Z0-9_]+)}");
    for (String module : List.of("persistence", "sharding", "node/continuous", "node")) {
      Path conf = repo.resolve(module + "/src/main/resources/reference.conf");
      if (!Files.exists(conf)) continue;
      Matcher m = p.matcher(Files.readString(conf));
      while (m.find()) names.add(m.group(1));
    }
    return names;
  }

  /** Variables of the JVM itself, not of Weir, that the artifacts may set. */
  private static final Set<String> JVM_ENVIRONMENT = Set.of("JAVA_TOOL_OPTIONS");

  @Test
  void theNodeReadsTheDocumentedEnvironment() throws IOException {
    Set<String> env = nodeEnvironment();
    assertThat(env)
        .contains(
            "WEIR_PG_URL",
            "WEIR_PG_USER",
            "WEIR_PG_PASSWORD",
            "WEIR_HTTP_HOST",
            "WEIR_HTTP_PORT",
            "WEIR_CLUSTER_HOST",
            "WEIR_CLUSTER_PORT",
            "WEIR_SEED_NODES",
            "WEIR_ADMIN_TOKEN",
            "WEIR_PARTITIONS",
            "WEIR_BOOTSTRAP_DISCOVERY",
            "WEIR_BOOTSTRAP_SERVICE",
            "WEIR_BOOTSTRAP_CONTACT_POINTS",
            "WEIR_MANAGEMENT_HOST",
            "WEIR_MANAGEMENT_PORT");
    String operations = Files.readString(repo.resolve("docs/operations.md"));
    for (String name : env)
      assertThat(operations).as("docs/operations.md documents " + name).contains(name);
  }

  @Test
  void everyYamlDocumentIsANamedKubernetesObject() {
    assertThat(documents).hasSizeGreaterThanOrEqualTo(8);
    for (Map<String, Object> d : documents) {
      String where = (String) d.get("__file");
      assertThat(d.get("apiVersion")).as(where + ": apiVersion").isInstanceOf(String.class);
      assertThat(d.get("kind")).as(where + ": kind").isInstanceOf(String.class);
      Map<String, Object> meta = map(d.get("metadata"), where + ": metadata");
      assertThat(meta.get("name")).as(where + ": metadata.name").isInstanceOf(String.class);
      assertThat(meta).as(where + ": namespace-agnostic").doesNotContainKey("namespace");
    }
    for (String kind :
        List.of(
            "StatefulSet",
            "Service",
            "ConfigMap",
            "PodDisruptionBudget",
            "ServiceAccount",
            "Role",
            "RoleBinding")) {
      assertThat(documents).as("a " + kind).anyMatch(d -> kind.equals(d.get("kind")));
    }
    assertThat(documents)
        .as("no Secret with values is committed")
        .noneMatch(d -> "Secret".equals(d.get("kind")));
  }

  @Test
  void kustomizationListsEveryManifest() throws IOException {
    Map<String, Object> k = object("Kustomization", "weir");
    Set<String> listed =
        list(k.get("resources"), "resources").stream()
            .map(Object::toString)
            .collect(Collectors.toCollection(TreeSet::new));
    Set<String> files = new TreeSet<>();
    for (Path p : yamlFiles())
      if (!p.getFileName().toString().equals("kustomization.yaml"))
        files.add(p.getFileName().toString());
    assertThat(listed).isEqualTo(files);
  }

  @Test
  void statefulSetProbesPortsAndEnvironmentMatchTheNode() throws IOException {
    Map<String, Object> sts = object("StatefulSet", "weir");
    Map<String, Object> spec = map(sts.get("spec"), "spec");
    assertThat(spec.get("replicas")).isEqualTo(3);
    String headless = (String) spec.get("serviceName");
    Map<String, Object> headlessSvc = map(object("Service", headless).get("spec"), "headless spec");
    assertThat(headlessSvc.get("clusterIP")).isEqualTo("None");
    assertThat(headlessSvc.get("publishNotReadyAddresses")).isEqualTo(true);

    Map<String, Object> pod = map(map(spec.get("template"), "template").get("spec"), "pod spec");
    assertThat(pod.get("serviceAccountName")).isEqualTo("weir");
    assertThat((Integer) pod.get("terminationGracePeriodSeconds")).isGreaterThanOrEqualTo(45);
    Map<String, Object> c = map(list(pod.get("containers"), "containers").get(0), "container");

    Map<String, Integer> ports = new LinkedHashMap<>();
    for (Object o : list(c.get("ports"), "ports")) {
      Map<String, Object> p = map(o, "port");
      ports.put((String) p.get("name"), (Integer) p.get("containerPort"));
    }
    Map<String, String> config = configMapData("weir-config");
    int httpPort = Integer.parseInt(config.get("WEIR_HTTP_PORT"));
    assertThat(ports.get("http")).isEqualTo(httpPort);
    assertThat(ports.get("remoting")).isEqualTo(Integer.parseInt(config.get("WEIR_CLUSTER_PORT")));
    assertThat(config.get("WEIR_HTTP_HOST"))
        .as("HTTP must listen beyond loopback in a pod")
        .isEqualTo("0.0.0.0");

    assertProbe(c, "readinessProbe", "/health/ready", httpPort, ports);
    assertProbe(c, "livenessProbe", "/health/alive", httpPort, ports);

    // Every variable the pod gets is one the node (or the JVM) reads, or a helper used in another
    // value.
    Set<String> understood = nodeEnvironment();
    Map<String, String> env = new LinkedHashMap<>(config);
    Set<String> fromSecret = new TreeSet<>();
    for (Object o : list(c.get("env"), "env")) {
      Map<String, Object> e = map(o, "env entry");
      String name = (String) e.get("name");
      env.put(name, e.get("value") == null ? "" : e.get("value").toString());
      if (e.get("valueFrom") instanceof Map<?, ?> vf && vf.containsKey("secretKeyRef"))
        fromSecret.add(name);
    }
    for (Object o : list(c.get("envFrom"), "envFrom")) {
      Map<String, Object> ref = map(map(o, "envFrom entry").get("configMapRef"), "configMapRef");
      assertThat(ref.get("name")).isEqualTo("weir-config");
    }
    String allValues = String.join("\n", env.values());
    for (String name : env.keySet()) {
      boolean helper = allValues.contains("$(" + name + ")");
      assertThat(understood.contains(name) || JVM_ENVIRONMENT.contains(name) || helper)
          .as(
              "env "
                  + name
                  + " is read by the node ("
                  + understood
                  + "), by the JVM, or used in another value")
          .isTrue();
    }
    assertThat(fromSecret)
        .as("secrets come from a Secret")
        .containsExactlyInAnyOrder("WEIR_PG_PASSWORD", "WEIR_ADMIN_TOKEN");
    assertThat(config)
        .as("no secret in the ConfigMap")
        .doesNotContainKeys("WEIR_PG_PASSWORD", "WEIR_ADMIN_TOKEN");
    assertThat(env.keySet()).contains("WEIR_PG_URL", "WEIR_CLUSTER_HOST", "WEIR_PARTITIONS");

    // The node's own address is its stable DNS name; the nodes find each other by bootstrap with
    // Kubernetes API discovery: the pods selected by the template's label, asked on their port
    // named "management", which is the node's management port, and as many contact points as
    // replicas.
    assertThat(env.get("WEIR_CLUSTER_HOST")).isEqualTo("$(POD_NAME)." + headless);
    assertThat(env).doesNotContainKey("WEIR_SEED_NODES");
    assertThat(config.get("WEIR_BOOTSTRAP_DISCOVERY")).isEqualTo("kubernetes-api");
    assertThat(Integer.parseInt(config.get("WEIR_BOOTSTRAP_CONTACT_POINTS")))
        .isEqualTo(spec.get("replicas"));
    assertThat(ports.get("management"))
        .isEqualTo(Integer.parseInt(config.get("WEIR_MANAGEMENT_PORT")));
    String jvm = config.get("JAVA_TOOL_OPTIONS");
    assertThat(jvm)
        .contains(
            "-Dpekko.management.cluster.bootstrap.contact-point-discovery.port-name=management");
    Map<String, Object> podLabels =
        map(
            map(map(spec.get("template"), "template").get("metadata"), "metadata").get("labels"),
            "labels");
    String selector =
        jvm.replaceAll(
            ".*-Dpekko\\.discovery\\.kubernetes-api\\.pod-label-selector=(\\S+).*", "$1");
    String[] kv = selector.replace("%s", config.get("WEIR_BOOTSTRAP_SERVICE")).split("=", 2);
    assertThat(podLabels.get(kv[0]))
        .as("the discovery selector %s matches the pods' label", selector)
        .isEqualTo(kv[1]);

    // Services route to ports the container declares.
    for (String svc : List.of(headless, "weir-http")) {
      for (Object o :
          list(
              map(object("Service", svc).get("spec"), "service spec").get("ports"),
              "service ports")) {
        assertThat(ports).containsKey((String) map(o, "service port").get("targetPort"));
      }
    }
  }

  private static void assertProbe(
      Map<String, Object> c, String probe, String path, int httpPort, Map<String, Integer> ports) {
    Map<String, Object> get = map(map(c.get(probe), probe).get("httpGet"), probe + ".httpGet");
    assertThat(get.get("path")).as(probe + " path").isEqualTo(path);
    Object port = get.get("port");
    int resolved = port instanceof String named ? ports.getOrDefault(named, -1) : (Integer) port;
    assertThat(resolved).as(probe + " port is the HTTP port").isEqualTo(httpPort);
  }

  private static Map<String, String> configMapData(String name) {
    Map<String, Object> data = map(object("ConfigMap", name).get("data"), "data");
    Map<String, String> out = new LinkedHashMap<>();
    data.forEach((k, v) -> out.put(k, v.toString()));
    return out;
  }

  @Test
  void rbacGrantsPodDiscoveryToTheNodesServiceAccount() {
    Map<String, Object> role = object("Role", "weir-pod-reader");
    boolean grants = false;
    for (Object o : list(role.get("rules"), "rules")) {
      Map<String, Object> r = map(o, "rule");
      if (list(r.get("apiGroups"), "apiGroups").contains("")
          && list(r.get("resources"), "resources").contains("pods")) {
        assertThat(list(r.get("verbs"), "verbs")).contains("get", "watch", "list");
        grants = true;
      }
    }
    assertThat(grants).as("a rule on core pods").isTrue();
    Map<String, Object> binding = object("RoleBinding", "weir-pod-reader");
    assertThat(map(binding.get("roleRef"), "roleRef"))
        .containsEntry("kind", "Role")
        .containsEntry("name", "weir-pod-reader");
    Map<String, Object> subject = map(list(binding.get("subjects"), "subjects").get(0), "subject");
    assertThat(subject).containsEntry("kind", "ServiceAccount").containsEntry("name", "weir");
    object("ServiceAccount", "weir");
  }

  @Test
  void disruptionBudgetKeepsAMajority() {
    Map<String, Object> spec = map(object("PodDisruptionBudget", "weir").get("spec"), "pdb spec");
    assertThat(spec.get("maxUnavailable")).isEqualTo(1);
  }

  @Test
  void dockerfileBuildsAndStartsTheNode() throws IOException {
    String docker = Files.readString(repo.resolve("deploy/docker/Dockerfile"));
    assertThat(docker).containsPattern("(?m)^FROM maven:3-eclipse-temurin-17 AS build$");
    assertThat(docker).containsPattern("(?m)^FROM eclipse-temurin:17-jre$");
    Matcher entry = Pattern.compile("(?m)^ENTRYPOINT (\\[.*])$").matcher(docker);
    assertThat(entry.find()).as("an exec-form ENTRYPOINT").isTrue();
    List<Object> argv =
        list(new Yaml(new SafeConstructor(new LoaderOptions())).load(entry.group(1)), "ENTRYPOINT");
    // Through the weir command (its class-data archive; docs/deploy.md, "Start-up"), which finds
    // the jar in its parent folder: both must be copied where it looks.
    assertThat(argv).containsExactly("/opt/weir/bin/weir", "node");
    assertThat(docker)
        .containsPattern("(?m)^COPY deploy/bin/weir /opt/weir/bin/weir$")
        .containsPattern("(?m)^COPY --from=build \\S+/weir-node.jar /opt/weir/weir-node.jar$");
    Matcher expose = Pattern.compile("(?m)^EXPOSE (.*)$").matcher(docker);
    assertThat(expose.find()).isTrue();
    assertThat(expose.group(1).trim().split("\\s+")).containsExactlyInAnyOrder("8080", "25520");
    assertThat(docker).containsPattern("(?m)^HEALTHCHECK[^\\n]*(\\\\\\n[^\\n]*)*/health/alive");
    Matcher user = Pattern.compile("(?m)^USER (\\S+)$").matcher(docker);
    assertThat(user.find()).as("a USER").isTrue();
    assertThat(user.group(1)).doesNotStartWith("root").doesNotStartWith("0");
    assertThat(docker).contains("WEIR_HTTP_PORT=8080").contains("WEIR_CLUSTER_PORT=25520");
    assertThat(Files.readString(repo.resolve(".dockerignore")))
        .contains(".weir")
        .contains("target");
  }

  @Test
  void systemdUnitStartsTheNodeFromAnEnvironmentFile() throws IOException {
    String unit = Files.readString(repo.resolve("deploy/systemd/weir.service"));
    Matcher exec = Pattern.compile("(?m)^ExecStart=(.*)$").matcher(unit);
    assertThat(exec.find()).isTrue();
    assertThat(exec.group(1)).isEqualTo("/opt/weir/bin/weir node");
    assertThat(unit)
        .as("the install commands put the weir command beside the jar's folder")
        .contains("deploy/bin/weir /opt/weir/bin/weir")
        .contains("cp node/target/weir-node.jar /opt/weir/");
    assertThat(unit)
        .containsPattern("(?m)^User=weir$")
        .containsPattern("(?m)^EnvironmentFile=\\S+")
        .containsPattern("(?m)^Restart=on-failure$");
    Matcher stop = Pattern.compile("(?m)^TimeoutStopSec=(\\d+)$").matcher(unit);
    assertThat(stop.find()).isTrue();
    assertThat(Integer.parseInt(stop.group(1)))
        .as("covers coordinated shutdown")
        .isGreaterThanOrEqualTo(45);

    Set<String> understood = nodeEnvironment();
    for (String line :
        Files.readAllLines(
            repo.resolve("deploy/systemd/weir.env.example"), StandardCharsets.UTF_8)) {
      if (line.isBlank() || line.startsWith("#")) continue;
      String name = line.substring(0, line.indexOf('='));
      assertThat(understood.contains(name) || name.equals("JAVA_OPTS"))
          .as("weir.env.example sets " + name)
          .isTrue();
      if (name.equals("WEIR_PG_PASSWORD") || name.equals("WEIR_ADMIN_TOKEN")) {
        assertThat(line.substring(line.indexOf('=') + 1))
            .as("placeholder, not a secret")
            .startsWith("<")
            .endsWith(">");
      }
    }
  }

  /**
   * No test lets the kernel pick a listening port (port 0 comes from the ephemeral range, where any
   * outbound connection may take it): servers take theirs from {@code TestPorts} and bind again
   * when a bind is lost (docs/testing.md).
   */
  @Test
  void noTestListensOnPortZero() throws IOException {
    Pattern portZero =
        Pattern.compile(
            "canonical\\.port\\s*=\\s*0\\b|canonical\\.port\",\\s*0\\b"
                + "|weir\\.(http|cluster)\\.port\",\\s*0\\b|\"127\\.0\\.0\\.1\",\\s*0\\)");
    List<String> found = new ArrayList<>();
    List<Path> sources = new ArrayList<>();
    for (String module :
        List.of("protocol", "persistence", "sharding", "node", "node/continuous", "deploy")) {
      try (Stream<Path> s = Files.walk(repo.resolve(module).resolve("src/test"))) {
        s.filter(q -> q.toString().endsWith(".java")).sorted().forEach(sources::add);
      }
    }
    for (Path source : sources) {
      List<String> lines = Files.readAllLines(source, StandardCharsets.UTF_8);
      for (int i = 0; i < lines.size(); i++) {
        if (portZero.matcher(lines.get(i)).find()) {
          found.add(repo.relativize(source) + ":" + (i + 1));
        }
      }
    }
    assertThat(sources).as("test sources found").hasSizeGreaterThan(100);
    assertThat(found).as("tests binding port 0").isEmpty();
  }

  @Test
  void everyScriptPassesBashSyntaxCheck() throws Exception {
    List<Path> scripts;
    try (Stream<Path> s = Files.list(repo.resolve("deploy/bin"))) {
      scripts =
          s.filter(p -> p.toString().endsWith(".sh") || p.getFileName().toString().equals("weir"))
              .sorted()
              .toList();
    }
    assertThat(scripts)
        .extracting(p -> p.getFileName().toString())
        .contains("cluster.sh", "run.sh", "pg.sh", "weir");
    assertThat(Files.isExecutable(repo.resolve("deploy/bin/weir")))
        .as("deploy/bin/weir is executable")
        .isTrue();
    for (Path script : scripts) {
      Process p =
          new ProcessBuilder("bash", "-n", script.toString()).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.waitFor(Duration.ofSeconds(30).toSeconds(), TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as("bash -n " + repo.relativize(script) + ": " + out).isZero();
    }
  }
}
