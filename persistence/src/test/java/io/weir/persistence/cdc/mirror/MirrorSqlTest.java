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

  private static final String INT = MirrorSql.typeName("pg_catalog", "int4");
  private static final String TEXT = MirrorSql.typeName("pg_catalog", "text");

  private static MirrorSql.Column col(String name, String type) {
    return new MirrorSql.Column(name, type, MirrorSql.Equality.OPERATOR, false);
  }

  @Test
  void typeNamesAreQuotedAndSchemaQualified() {
    assertThat(MirrorSql.typeName("my \"types\"", "Pair"))
        .as("a type from the catalog is cast to by its quoted, qualified name")
        .isEqualTo("\"my \"\"types\"\"\".\"Pair\"");
    assertThat(col("k", MirrorSql.typeName("public", "pair")).param())
        .isEqualTo("?::\"public\".\"pair\"");
  }

  @Test
  void upsertUpdatesEveryNonKeyColumnOnConflict() {
    assertThat(
            MirrorSql.upsert(
                "\"m\".\"t\"",
                List.of(col("id", INT), col("name", TEXT), col("qty", INT)),
                List.of("id"),
                false,
                java.util.Set.of(),
                null))
        .isEqualTo(
            "INSERT INTO \"m\".\"t\" AS weir_target (\"id\", \"name\", \"qty\")"
                + " VALUES (?::\"pg_catalog\".\"int4\", ?::\"pg_catalog\".\"text\","
                + " ?::\"pg_catalog\".\"int4\")"
                + " ON CONFLICT (\"id\") DO UPDATE SET \"name\" = EXCLUDED.\"name\", \"qty\" = EXCLUDED.\"qty\"");
  }

  @Test
  void upsertOfKeyColumnsOnlyDoesNothingOnConflict() {
    assertThat(
            MirrorSql.upsert(
                "\"m\".\"t\"",
                List.of(col("a", INT), col("b", INT)),
                List.of("a", "b"),
                false,
                java.util.Set.of(),
                null))
        .as("with nothing but key columns there is nothing to set, so a conflict must be a no-op")
        .endsWith(" ON CONFLICT (\"a\", \"b\") DO NOTHING");
  }

  @Test
  void upsertOfAGeneratedAlwaysIdentityOverridesAndNeverSetsIt() {
    String sql =
        MirrorSql.upsert(
            "\"m\".\"t\"",
            List.of(col("code", TEXT), col("seq", INT), col("v", TEXT)),
            List.of("code"),
            true,
            java.util.Set.of("seq"),
            "seq");
    assertThat(sql)
        .contains(") OVERRIDING SYSTEM VALUE VALUES (")
        .endsWith(
            " DO UPDATE SET \"v\" = EXCLUDED.\"v\""
                + " WHERE weir_target.\"seq\" IS NOT DISTINCT FROM EXCLUDED.\"seq\"");
  }

  @Test
  void deleteAndUpdateMatchEveryKeyColumnCastToItsType() {
    assertThat(MirrorSql.deleteByKey("\"m\".\"t\"", List.of(col("a", INT), col("b", TEXT))))
        .isEqualTo(
            "DELETE FROM \"m\".\"t\" WHERE \"a\" = ?::\"pg_catalog\".\"int4\""
                + " AND \"b\" = ?::\"pg_catalog\".\"text\"");
    assertThat(
            MirrorSql.updateByKey(
                "\"m\".\"t\"", List.of(col("a", INT), col("x", TEXT)), List.of(col("a", INT))))
        .isEqualTo(
            "UPDATE \"m\".\"t\" SET \"a\" = ?::\"pg_catalog\".\"int4\","
                + " \"x\" = ?::\"pg_catalog\".\"text\" WHERE \"a\" = ?::\"pg_catalog\".\"int4\"");
  }

  @Test
  void keylessRowsAreMatchedNullSafelyAndOneAtATime() {
    List<MirrorSql.Column> cols =
        List.of(
            col("a", INT),
            new MirrorSql.Column("j", "\"pg_catalog\".\"json\"", MirrorSql.Equality.TEXT, false),
            new MirrorSql.Column("p", "\"public\".\"pair\"", MirrorSql.Equality.OPERATOR, true),
            col("b", TEXT));
    java.util.BitSet nulls = new java.util.BitSet();
    nulls.set(2);
    nulls.set(3);
    String match = MirrorSql.match(cols, nulls);
    assertThat(match)
        .isEqualTo(
            "\"a\" = ?::\"pg_catalog\".\"int4\""
                + " AND \"j\"::pg_catalog.text = ?::pg_catalog.text"
                + " AND \"p\" IS NOT DISTINCT FROM NULL AND \"b\" IS NULL");
    assertThat(MirrorSql.deleteOne("\"m\".\"t\"", match))
        .isEqualTo(
            "DELETE FROM \"m\".\"t\" WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM"
                + " \"m\".\"t\" WHERE "
                + match
                + " LIMIT 1)");
    assertThat(
            MirrorSql.replaceOne(
                "\"m\".\"t\"", List.of(col("a", INT)), List.of("big"), "\"a\" IS NULL", true))
        .isEqualTo(
            "WITH weir_old AS (DELETE FROM \"m\".\"t\" WHERE (tableoid, ctid) = (SELECT tableoid,"
                + " ctid FROM \"m\".\"t\" WHERE \"a\" IS NULL LIMIT 1) RETURNING \"big\")"
                + " INSERT INTO \"m\".\"t\" (\"a\", \"big\") OVERRIDING SYSTEM VALUE"
                + " SELECT ?::\"pg_catalog\".\"int4\", weir_old.\"big\" FROM weir_old");
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
