package io.weir.persistence.cdc.mirror;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.ConfigFactory;
import io.weir.persistence.SettingsException;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class MirrorSettingsTest {

  private static TableSchema table(String schema, String name) {
    return new TableSchema(
        1,
        schema,
        name,
        ReplicaIdentity.DEFAULT,
        List.of(new TableSchema.Column("id", 23, -1, true)));
  }

  @Test
  void defaultsMirrorUnderTheSourceTableName() {
    MirrorSettings s = MirrorSettings.of("mirror");
    assertThat(s.checkpointTable()).isEqualTo("weir_mirror_checkpoint");
    assertThat(s.appliedLog()).isFalse();
    assertThat(s.targetTable(table("public", "Orders")))
        .as("an unmapped source table should keep its own name in the target schema")
        .isEqualTo("Orders");
    assertThat(s.withTable("public.Orders", "orders_copy").targetTable(table("public", "Orders")))
        .isEqualTo("orders_copy");
    assertThat(s.withAppliedLog(true).bookkeepingTables())
        .containsExactly("mirror.weir_mirror_checkpoint", "mirror.weir_mirror_applied");
  }

  @Test
  void invalidNamesAreRefusedWithoutRepeatingThem() {
    String hostile = "x\"; DROP TABLE t; --";
    assertThatThrownBy(() -> MirrorSettings.of(hostile))
        .isInstanceOf(IllegalArgumentException.class)
        .message()
        .as("the error should describe the expected shape, never echo the value")
        .doesNotContain(hostile)
        .contains("target schema");
    assertThatThrownBy(() -> MirrorSettings.of("m").withCheckpointTable(hostile))
        .isInstanceOf(IllegalArgumentException.class)
        .message()
        .doesNotContain(hostile);
    assertThatThrownBy(() -> MirrorSettings.of("m").withTable("public.t", hostile))
        .isInstanceOf(IllegalArgumentException.class)
        .message()
        .doesNotContain(hostile);
    assertThatThrownBy(() -> MirrorSettings.of("m").withTable("no_schema", "t"))
        .as("a mapping key must name the source table with its schema")
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MirrorSettings.of("m").withTable("public.t", "weir_mirror_checkpoint"))
        .as("a source table must not be mirrored over the checkpoint table")
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> MirrorSettings.of("m").withCheckpointTable(MirrorSettings.APPLIED_LOG_TABLE))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void mappingIsCopied() {
    Map<String, String> tables = new java.util.HashMap<>(Map.of("public.a", "b"));
    MirrorSettings s = new MirrorSettings("m", tables, "c", false);
    tables.put("public.x", "y");
    assertThat(s.tables())
        .as("later changes to the caller's map must not reach the settings")
        .hasSize(1);
  }

  @Test
  void readsConfigSubtree() {
    MirrorSettings s =
        MirrorSettings.create(
            ConfigFactory.parseString(
                "target-schema = mirror\n applied-log = on\n tables { \"public.orders\" = orders_copy }"));
    assertThat(s)
        .isEqualTo(
            new MirrorSettings(
                "mirror", Map.of("public.orders", "orders_copy"), "weir_mirror_checkpoint", true));
  }

  @Test
  void configErrorsNameTheKeyNotTheValue() {
    assertThatThrownBy(() -> MirrorSettings.create(ConfigFactory.parseString("applied-log = true")))
        .isInstanceOf(SettingsException.class)
        .hasMessageContaining("target-schema");
    assertThatThrownBy(
            () ->
                MirrorSettings.create(ConfigFactory.parseString("target-schema = \"Bad Schema\"")))
        .isInstanceOf(SettingsException.class)
        .message()
        .doesNotContain("Bad Schema");
    assertThatThrownBy(
            () ->
                MirrorSettings.create(
                    ConfigFactory.parseString(
                        "target-schema = m\n tables { \"public.t\" = \"Secret Name\" }")))
        .isInstanceOf(SettingsException.class)
        .message()
        .contains("tables")
        .doesNotContain("Secret Name");
  }
}
