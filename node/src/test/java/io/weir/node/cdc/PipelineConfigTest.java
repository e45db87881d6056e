package io.weir.node.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.persistence.SettingsException;
import io.weir.persistence.cdc.source.StartMode;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class PipelineConfigTest {
  private static Config config(String pipelines) {
    return ConfigFactory.parseString(
            "weir.postgres.url = \"jdbc:postgresql://127.0.0.1/weir\"\n" + pipelines)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }

  @Test
  void pipelinesInheritDefaultsAndExcludeWeirsAndTheSinksSchemas() {
    List<PipelineConfig> all =
        PipelineConfig.all(
            config(
                "weir.pipelines.orders { slot = orders_slot, publications = [orders_pub], start-mode = resume,"
                    + " batch.max-transactions = 50, sink.target-schema = mirror }"));
    assertThat(all).hasSize(1);
    PipelineConfig p = all.get(0);
    assertThat(p.settings().startMode()).isEqualTo(StartMode.RESUME);
    assertThat(p.settings().batchMaxTransactions()).isEqualTo(50);
    assertThat(p.settings().inFlightWindow()).as("default in-flight window").isEqualTo(64);
    assertThat(p.settings().handoverWindow()).isEqualTo(Duration.ofSeconds(60));
    assertThat(p.settings().excludedSchemas()).containsExactly("weir", "mirror");
    assertThat(p.source().url())
        .as("the source defaults to Weir's own database")
        .isEqualTo("jdbc:postgresql://127.0.0.1/weir");
    assertThat(p.autostart()).isTrue();
    assertThat(p.settings().messages()).as("messages are opt-in").isFalse();
    assertThat(p.settings().streaming().enabled()).as("streaming is opt-in").isFalse();
    assertThat(p.settings().streaming().spills()).isFalse();
  }

  @Test
  void sourceTlsFallsBackToWeirsAndCanBeSetPerPipeline(
      @org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
    java.nio.file.Path root =
        io.weir.persistence.testing.TestCertificates.in(dir)
            .authority("pipeline-tls")
            .certificate();
    String weirTls = "weir.postgres.tls { mode = verify-full, root-cert = \"" + root + "\" }\n";
    PipelineConfig inherited =
        PipelineConfig.all(
                config(
                    weirTls
                        + "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m }"))
            .get(0);
    assertThat(inherited.source().tls().mode())
        .as("the source is Weir's database by default, so is its TLS")
        .isEqualTo("verify-full");
    assertThat(inherited.source().tls().rootCert()).isEqualTo(root);

    PipelineConfig own =
        PipelineConfig.all(
                config(
                    weirTls
                        + "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m,"
                        + " source { url = \"jdbc:postgresql://other.example/app\", tls.mode = require } }"))
            .get(0);
    assertThat(own.source().tls().mode())
        .as("source.tls replaces weir.postgres.tls as a whole")
        .isEqualTo("require");
    assertThat(own.source().tls().rootCert()).isNull();

    assertThatThrownBy(
            () ->
                PipelineConfig.all(
                    config(
                        "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m, source.tls.mode = sometimes }")))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.pipelines.a.source.tls.mode"))
        .hasMessageNotContaining("sometimes");
    assertThatThrownBy(
            () ->
                PipelineConfig.all(
                    config(
                        "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m,"
                            + " source { url = \"jdbc:postgresql://other.example/app?sslmode=disable\", tls.mode = require } }")))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.pipelines.a.source.url"));
    assertThat(
            PipelineConfig.all(
                    config(
                        "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m }"))
                .get(0)
                .source()
                .tls()
                .isSet())
        .as("unset stays unset")
        .isFalse();
  }

  @Test
  void streamingAndSpillSettings() {
    PipelineConfig p =
        PipelineConfig.all(
                config(
                    "weir.pipelines.big { slot = s, publications = [p], sink.target-schema = m,"
                        + " streaming { enabled = true, decoding-work-mem = 1MiB,"
                        + " spill { directory = \"/var/lib/weir/spill\", memory-bound = 8MiB, max-bytes = 2GiB } } }"))
            .get(0);
    assertThat(p.settings().streaming().enabled()).isTrue();
    assertThat(p.settings().streaming().decodingWorkMemKb()).isEqualTo(1024);
    assertThat(p.settings().streaming().spillDirectory()).hasToString("/var/lib/weir/spill");
    assertThat(p.settings().streaming().memoryBound()).isEqualTo(8L << 20);
    assertThat(p.settings().streaming().maxSpillBytes()).isEqualTo(2L << 30);
    assertThat(p.settings().streaming().spills()).isTrue();
    PipelineConfig defaults =
        PipelineConfig.all(
                config(
                    "weir.pipelines.d { slot = s, publications = [p], sink.target-schema = m, streaming.enabled = true }"))
            .get(0);
    assertThat(defaults.settings().streaming().decodingWorkMemKb())
        .as("the server's setting")
        .isZero();
    assertThat(defaults.settings().streaming().spills())
        .as("no spill directory, no spilling")
        .isFalse();
    PipelineConfig pgStyle =
        PipelineConfig.all(
                config(
                    "weir.pipelines.d { slot = s, publications = [p], sink.target-schema = m, streaming.decoding-work-mem = 64kB }"))
            .get(0);
    assertThat(pgStyle.settings().streaming().decodingWorkMemKb())
        .as("PostgreSQL's 64kB minimum, though HOCON's kB is 1000 bytes")
        .isEqualTo(64);
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m, streaming.decoding-work-mem = 10kB }",
        "weir.pipelines.a.streaming.decoding-work-mem");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m, streaming.spill.max-bytes = lots }",
        "weir.pipelines.a.streaming.spill.max-bytes");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m, streaming.enabled = maybe }",
        "weir.pipelines.a.streaming.enabled");
  }

  @Test
  void zeroRetriesMeanHaltOnTheFirstFaultAndNegativeOnesAreRefused() {
    PipelineConfig p =
        PipelineConfig.all(
                config(
                    "weir.pipelines.f { slot = s, publications = [p], max-command-retries = 0,"
                        + " max-sink-retries = 0, sink { type = file, path = \"/tmp/f.jsonl\","
                        + " checkpoint { every = 10, max-delay = 250ms, max-retries = 0 } } }"))
            .get(0);
    assertThat(p.settings().maxCommandRetries()).isZero();
    assertThat(p.settings().maxSinkRetries()).isZero();
    assertThat(p.file().maxRetries()).isZero();
    assertThat(p.file().checkpointEvery()).isEqualTo(10);
    assertThat(p.file().checkpointMaxDelay()).isEqualTo(Duration.ofMillis(250));
    PipelineConfig defaults =
        PipelineConfig.all(
                config(
                    "weir.pipelines.f { slot = s, publications = [p], sink { type = file, path ="
                        + " \"/tmp/f.jsonl\" } }"))
            .get(0);
    assertThat(defaults.settings().maxSinkRetries()).isEqualTo(10);
    assertThat(defaults.file().checkpointMaxDelay()).isEqualTo(Duration.ofSeconds(1));
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], max-sink-retries = -1, sink.target-schema = m }",
        "weir.pipelines.a.max-sink-retries");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], sink { type = file, path = \"/tmp/f\","
            + " checkpoint.max-delay = 0s } }",
        "weir.pipelines.a.sink.checkpoint.max-delay");
  }

  @Test
  void faultsNameTheFullKey() {
    assertKey(
        "weir.pipelines.a { publications = [p], sink.target-schema = m }", "weir.pipelines.a.slot");
    assertKey(
        "weir.pipelines.a { slot = \"Bad Slot\", publications = [p], sink.target-schema = m }",
        "weir.pipelines.a.slot");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [], sink.target-schema = m }",
        "weir.pipelines.a.publications");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], start-mode = sometimes, sink.target-schema = m }",
        "weir.pipelines.a.start-mode");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], sink { type = kafka, target-schema = m } }",
        "weir.pipelines.a.sink.type");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = \"Not Valid\" }",
        "weir.pipelines.a.sink.target-schema");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], in-flight-window = 0, sink.target-schema = m }",
        "weir.pipelines.a.in-flight-window");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], sink.target-schema = m }\n"
            + "weir.pipelines.b { slot = s, publications = [q], sink.target-schema = n }",
        "weir.pipelines.b.slot");
  }

  @Test
  void snapshotStartModeAndItsConflicts() {
    PipelineConfig p =
        PipelineConfig.all(
                config(
                    "weir.pipelines.a { slot = s, publications = [p], start-mode = snapshot, snapshot.batch-rows = 100,"
                        + " sink.target-schema = m }"))
            .get(0);
    assertThat(p.settings().startMode()).isEqualTo(StartMode.SNAPSHOT);
    assertThat(p.settings().snapshotBatchRows()).isEqualTo(100);
    assertThat(
            PipelineConfig.all(
                    config(
                        "weir.pipelines.a { slot = s, publications = [p], start-mode = [snapshot], sink.target-schema = m }"))
                .get(0)
                .settings()
                .startMode())
        .isEqualTo(StartMode.SNAPSHOT);
    assertThatThrownBy(
            () ->
                PipelineConfig.all(
                    config(
                        "weir.pipelines.a { slot = s, publications = [p], start-mode = [go-forward, snapshot], sink.target-schema = m }")))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> {
              assertThat(e.key()).isEqualTo("weir.pipelines.a.start-mode");
              assertThat(e.getMessage())
                  .contains("conflicting start modes: go-forward and snapshot");
            });
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], start-mode = [snapshot, incremental], sink.target-schema = m }",
        "weir.pipelines.a.start-mode");
    PipelineConfig inc =
        PipelineConfig.all(
                config(
                    "weir.pipelines.a { slot = s, publications = [p], start-mode = [resume, incremental], sink.target-schema = m }"))
            .get(0);
    assertThat(inc.settings().startMode()).isEqualTo(StartMode.RESUME);
    assertThat(inc.settings().incrementalAtStart()).isTrue();
    assertThat(
            PipelineConfig.all(
                    config(
                        "weir.pipelines.a { slot = s, publications = [p], start-mode = incremental, sink.target-schema = m }"))
                .get(0)
                .settings()
                .startMode())
        .as("incremental alone goes forward")
        .isEqualTo(StartMode.GO_FORWARD);
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], start-mode = [], sink.target-schema = m }",
        "weir.pipelines.a.start-mode");
    assertKey(
        "weir.pipelines.a { slot = s, publications = [p], snapshot.batch-rows = 0, sink.target-schema = m }",
        "weir.pipelines.a.snapshot.batch-rows");
  }

  @Test
  void atMostOnePipelineFeedsContinuousQueries() {
    List<PipelineConfig> one =
        PipelineConfig.all(
            config(
                "weir.pipelines.live { slot = live_slot, publications = [live_pub], sink.type = continuous }"));
    assertThat(one.get(0).continuous()).isTrue();
    assertThat(one.get(0).partitions()).isNull();
    assertKey(
        "weir.pipelines.a { slot = a_slot, publications = [p], sink.type = continuous }\n"
            + "weir.pipelines.b { slot = b_slot, publications = [p], sink.type = continuous }",
        "weir.pipelines.b.sink.type");
  }

  private static void assertKey(String pipelines, String key) {
    assertThatThrownBy(() -> PipelineConfig.all(config(pipelines)))
        .isInstanceOfSatisfying(SettingsException.class, e -> assertThat(e.key()).isEqualTo(key));
  }
}
