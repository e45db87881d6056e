package io.weir.persistence.cdc.mirror;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class MirrorSqlTest {

  @Test
  void quotingDoublesEmbeddedQuotesAndKeepsCase() {
    assertThat(MirrorSql.quote("Order \"Lines\""))
        .as("an identifier from the source catalog should be quoted with embedded quotes doubled")
        .isEqualTo("\"Order \"\"Lines\"\"\"");
    assertThat(MirrorSql.qualified("mirror", "T")).isEqualTo("\"mirror\".\"T\"");
    assertThatThrownBy(() -> MirrorSql.quote(""))
        .as("an empty identifier cannot be quoted into valid SQL")
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MirrorSql.quote("a\0b"))
        .as("a NUL character cannot be part of an identifier")
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void upsertUpdatesEveryNonKeyColumnOnConflict() {
    assertThat(MirrorSql.upsert("\"m\".\"t\"", List.of("id", "name", "qty"), List.of("id")))
        .isEqualTo(
            "INSERT INTO \"m\".\"t\" (\"id\", \"name\", \"qty\") VALUES (?, ?, ?)"
                + " ON CONFLICT (\"id\") DO UPDATE SET \"name\" = EXCLUDED.\"name\", \"qty\" = EXCLUDED.\"qty\"");
  }

  @Test
  void upsertOfKeyColumnsOnlyDoesNothingOnConflict() {
    assertThat(MirrorSql.upsert("\"m\".\"t\"", List.of("a", "b"), List.of("a", "b")))
        .as("with nothing but key columns there is nothing to set, so a conflict must be a no-op")
        .isEqualTo(
            "INSERT INTO \"m\".\"t\" (\"a\", \"b\") VALUES (?, ?) ON CONFLICT (\"a\", \"b\") DO NOTHING");
  }

  @Test
  void deleteAndUpdateMatchEveryKeyColumn() {
    assertThat(MirrorSql.deleteByKey("\"m\".\"t\"", List.of("a", "b")))
        .isEqualTo("DELETE FROM \"m\".\"t\" WHERE \"a\" = ? AND \"b\" = ?");
    assertThat(MirrorSql.updateByKey("\"m\".\"t\"", List.of("a", "x"), List.of("a")))
        .isEqualTo("UPDATE \"m\".\"t\" SET \"a\" = ?, \"x\" = ? WHERE \"a\" = ?");
  }

  @Test
  void truncateNeverCascades() {
    assertThat(MirrorSql.truncate(List.of("\"m\".\"a\"", "\"m\".\"b\""), true))
        .isEqualTo("TRUNCATE \"m\".\"a\", \"m\".\"b\" RESTART IDENTITY");
    assertThat(MirrorSql.truncate(List.of("\"m\".\"a\""), false))
        .as("the mirror must not empty tables that merely reference a target")
        .doesNotContain("CASCADE")
        .isEqualTo("TRUNCATE \"m\".\"a\"");
  }

  @Test
  void appliedLogHasNoUniqueConstraintSoDuplicatesStayCountable() {
    assertThat(MirrorSql.createAppliedLog("\"m\".\"weir_mirror_applied\""))
        .doesNotContainIgnoringCase("primary key")
        .doesNotContainIgnoringCase("unique");
    assertThat(MirrorSql.createCheckpointTable("\"m\".\"c\""))
        .contains("pipeline text PRIMARY KEY", "commit_lsn pg_lsn NOT NULL");
  }
}
