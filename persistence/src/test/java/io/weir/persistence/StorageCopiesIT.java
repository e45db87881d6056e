package io.weir.persistence;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import org.junit.jupiter.api.Test;

/** The copies read from a real PostgreSQL without standbys. */
class StorageCopiesIT {
  @Test
  void aSinglePostgresKeepsOneCopy() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("copies");
        Connection c = db.connect()) {
      StorageCopies copies = StorageCopies.read(c);
      assertThat(copies.copies()).isEqualTo(1);
      assertThat(copies.known()).isTrue();
      assertThat(copies.detail()).contains("no synchronous standbys");
    }
  }
}
