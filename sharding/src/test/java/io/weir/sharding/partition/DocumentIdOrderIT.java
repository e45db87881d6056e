package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Documents page in code-point order ({@link Ids#ORDER}, what the partition's index, the feed and
 * every split assume) also in a database whose default collation sorts otherwise, as most
 * production databases do (an en-US one here: 'a' before 'B', accents beside their letters): the
 * table's ids compare {@code COLLATE "C"}. The private test server's databases are {@code C.UTF-8},
 * where any collation would pass, so this one is created with ICU's en-US.
 */
class DocumentIdOrderIT {
  private static final String EN_US =
      "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'";

  /** Ids whose code-point order differs from en-US's: case, accents, beyond the BMP, digits. */
  private static final List<String> IDS =
      List.of("a", "B", "Z", "z", "é", "e", "ä", "\uD83D\uDE00", "\uFFFD", "10", "9", "a-b", "a_b");

  @Test
  void pagesFollowCodePointsWhateverTheDatabasesCollation() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("id_order", EN_US)) {
      try (Connection c = db.connect();
          ResultSet rs = c.createStatement().executeQuery("SELECT 'a' < 'B', 'é' < 'z'")) {
        rs.next();
        assertThat(rs.getBoolean(1) && rs.getBoolean(2))
            .as("the database's own collation sorts by language, not code point")
            .isTrue();
      }
      PGSimpleDataSource data = new PGSimpleDataSource();
      data.setUrl(db.url());
      data.setUser(TestPostgres.server().user());
      data.setPassword(TestPostgres.server().password());
      SchemaMigrator.migrate(data, "weir");
      try (Connection c = db.connect();
          Statement s = c.createStatement();
          PreparedStatement ps =
              c.prepareStatement(
                  "INSERT INTO weir.documents (partition_id, collection, id, revision, body, acl,"
                      + " deleted, journal_seq) VALUES (1, 'c', ?, 1, '{}', NULL, false, 1)")) {
        s.execute(
            "INSERT INTO weir.document_positions (partition_id, applied_through, rule_fields)"
                + " VALUES (1, 1, '{}')");
        for (String id : IDS) {
          ps.setString(1, id);
          ps.executeUpdate();
        }
      }
      List<String> expected = new ArrayList<>(IDS);
      expected.sort(Ids.ORDER);
      List<String> byLanguage = new ArrayList<>();
      try (Connection c = db.connect();
          ResultSet rs =
              c.createStatement()
                  .executeQuery(
                      "SELECT x FROM unnest(ARRAY["
                          + String.join(",", IDS.stream().map(i -> "'" + i + "'").toList())
                          + "]) x ORDER BY x")) {
        while (rs.next()) {
          byLanguage.add(rs.getString(1));
        }
      }
      assertThat(byLanguage)
          .as("the ids sort otherwise by the database's collation")
          .isNotEqualTo(expected);

      ExecutorService io = Executors.newSingleThreadExecutor();
      try {
        SqlDocumentTable table = new SqlDocumentTable(data, "weir", io);
        List<String> paged = new ArrayList<>();
        String after = null;
        while (true) {
          List<String> page = new ArrayList<>();
          table
              .scan(
                  1,
                  "c",
                  after,
                  3,
                  false,
                  new DocumentTable.ScanVisitor() {
                    @Override
                    public void seen(DocumentTable.Seen seen) {}

                    @Override
                    public boolean row(DocumentTable.Row row) {
                      page.add(row.document().id());
                      return true;
                    }
                  })
              .toCompletableFuture()
              .get();
          if (page.isEmpty()) {
            break;
          }
          paged.addAll(page);
          after = page.get(page.size() - 1);
        }
        assertThat(paged)
            .as("pages of 3 after the last id, in code-point order")
            .isEqualTo(expected);
      } finally {
        io.shutdownNow();
      }
    }
  }
}
