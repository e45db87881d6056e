package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.cdc.mirror.MirrorSettings;
import io.weir.persistence.cdc.mirror.PostgresMirrorSink;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;

/**
 * {@link CdcPipeline.CheckTables} against real catalogs: each table class the mirror handles (and
 * each it refuses) is reported before anything streams, and what it reports is what the stream then
 * does.
 */
class PipelineCheckIT extends PipelineITBase {

  @Override
  protected String harnessName() {
    return "pipeline-check";
  }

  private Map<String, TableVerdict> check(ActorRef<CdcPipeline.Command> p) {
    var probe = kit.<CdcPipeline.CheckReply>createTestProbe();
    p.tell(new CdcPipeline.CheckTables(probe.ref()));
    CdcPipeline.CheckReply reply = probe.receiveMessage(Duration.ofSeconds(60));
    assertThat(reply.error()).isNull();
    Map<String, TableVerdict> out = new LinkedHashMap<>();
    for (TableVerdict v : reply.tables()) {
      out.put(v.table(), v);
    }
    return out;
  }

  @Test
  void theMirrorSaysHowItHandlesEachPublishedTableBeforeAnythingStreams() throws Exception {
    sql(
        "CREATE TABLE pk_t (id int PRIMARY KEY, v text)",
        "CREATE TABLE idx_t (a int NOT NULL, b text)",
        "CREATE UNIQUE INDEX idx_t_a ON idx_t (a)",
        "ALTER TABLE idx_t REPLICA IDENTITY USING INDEX idx_t_a",
        "CREATE TABLE full_t (a int, b text)",
        "ALTER TABLE full_t REPLICA IDENTITY FULL",
        "CREATE TABLE ins_t (a int, b text)",
        "CREATE TABLE keyless_t (a int PRIMARY KEY, b text)",
        "CREATE TABLE nokey_t (a int, b text)",
        "CREATE TABLE missing_t (id int PRIMARY KEY)",
        "CREATE TABLE gen_t (id int PRIMARY KEY, v int)",
        "CREATE TABLE notkey_t (id int PRIMARY KEY, code text NOT NULL)",
        "CREATE SCHEMA mirror",
        "CREATE TABLE mirror.pk_t (id int PRIMARY KEY, v text)",
        "CREATE TABLE mirror.idx_t (a int NOT NULL, b text)",
        "CREATE UNIQUE INDEX m_idx_t_a ON mirror.idx_t (a)",
        "ALTER TABLE mirror.idx_t REPLICA IDENTITY USING INDEX m_idx_t_a",
        "CREATE TABLE mirror.full_t (a int, b text)",
        "CREATE TABLE mirror.ins_t (a int, b text)",
        "CREATE TABLE mirror.keyless_t (a int, b text)",
        "CREATE TABLE mirror.nokey_t (a int, b text)",
        "CREATE TABLE mirror.gen_t (id int PRIMARY KEY, v int GENERATED ALWAYS AS (id * 2) STORED)",
        "CREATE TABLE mirror.notkey_t (id int, code text PRIMARY KEY)",
        "CREATE PUBLICATION all_pub FOR TABLE pk_t, idx_t, full_t, keyless_t, missing_t, gen_t,"
            + " notkey_t, nokey_t",
        "CREATE PUBLICATION ins_pub FOR TABLE ins_t WITH (publish = 'insert')");
    PostgresMirrorSink sink =
        new PostgresMirrorSink(state.dataSource(), blockingIo, MirrorSettings.of("mirror"));
    PipelineSettings settings =
        PipelineSettings.of("p_" + slot, slot, List.of("all_pub", "ins_pub"))
            .withExcludedSchemas(List.of("weir", "mirror"))
            .withStatusInterval(Duration.ofSeconds(1));
    ActorRef<CdcPipeline.Command> p =
        kit.spawn(CdcPipeline.create(settings, source, sink, state.dataSource(), "weir"));

    Map<String, TableVerdict> verdicts = check(p);
    assertThat(verdicts.keySet())
        .containsExactly(
            "public.full_t",
            "public.gen_t",
            "public.idx_t",
            "public.ins_t",
            "public.keyless_t",
            "public.missing_t",
            "public.nokey_t",
            "public.notkey_t",
            "public.pk_t");
    assertThat(verdicts.get("public.pk_t").handling()).isEqualTo("by-primary-key");
    assertThat(verdicts.get("public.pk_t").detail()).contains("[id]");
    assertThat(verdicts.get("public.idx_t").handling()).isEqualTo("by-identity-index");
    assertThat(verdicts.get("public.full_t").handling()).isEqualTo("by-full-image");
    assertThat(verdicts.get("public.ins_t").handling()).isEqualTo("inserts-only");
    assertThat(verdicts.get("public.nokey_t").handling())
        .as("no replica identity: PostgreSQL refuses its updates and deletes at the source")
        .isEqualTo("inserts-only");
    assertRefused(verdicts.get("public.keyless_t"), "no-row-identity");
    assertRefused(verdicts.get("public.missing_t"), "target-missing");
    assertRefused(verdicts.get("public.gen_t"), "target-column-generated");
    assertRefused(verdicts.get("public.notkey_t"), "key-not-replica-identity");

    // What the check said is what the stream does: the handled tables mirror, a refused one halts
    // with the reason the check gave.
    var started = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Start(started.ref()));
    h.awaitState(p, "running", Duration.ofSeconds(60));
    sql(
        "INSERT INTO pk_t VALUES (1, 'a')",
        "UPDATE pk_t SET v = 'b' WHERE id = 1",
        "INSERT INTO idx_t VALUES (1, 'a')",
        "UPDATE idx_t SET b = 'b' WHERE a = 1",
        "INSERT INTO full_t VALUES (1, 'a'), (1, 'a')",
        "DELETE FROM full_t WHERE ctid = (SELECT min(ctid) FROM full_t)",
        "INSERT INTO ins_t VALUES (1, 'a')",
        "INSERT INTO nokey_t VALUES (1, 'a')",
        "INSERT INTO keyless_t VALUES (1, 'a')",
        "UPDATE keyless_t SET b = 'b' WHERE a = 1");
    PipelineStatus halted = h.awaitState(p, "halted", Duration.ofSeconds(60));
    assertThat(halted.reason()).isEqualTo("sink-rejected");
    assertThat(halted.detail()).contains("[no-row-identity]").contains("keyless_t");
    assertThat(count("mirror.pk_t WHERE v = 'b'")).isEqualTo(1);
    assertThat(count("mirror.idx_t WHERE b = 'b'")).isEqualTo(1);
    assertThat(count("mirror.full_t")).as("one of two equal rows deleted").isEqualTo(1);
    assertThat(count("mirror.ins_t")).isEqualTo(1);
    assertThat(count("mirror.nokey_t")).isEqualTo(1);
  }

  private static void assertRefused(TableVerdict v, String reason) {
    assertThat(v.handling()).isEqualTo("refused");
    assertThat(v.reason()).isEqualTo(reason);
    assertThat(v.detail()).contains("[" + reason + "]");
  }

  private long count(String from) throws Exception {
    try (var c = db.connect();
        var rs = c.createStatement().executeQuery("SELECT count(*) FROM " + from)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
