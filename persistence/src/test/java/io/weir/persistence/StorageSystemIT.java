package io.weir.persistence;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.postgresql.PGProperty;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The storage identity read with plain SQL agrees with what {@code IDENTIFY_SYSTEM} answers on a
 * replication connection, and the wait for standbys is immediate without them and bounded when they
 * cannot be had.
 */
class StorageSystemIT {
  @Test
  void theIdentityMatchesIdentifySystem() throws Exception {
    TestPostgres server = TestPostgres.server();
    try (TestPostgres.TestDatabase db = server.freshDatabase("storage_system");
        Connection c = db.connect()) {
      StorageSystem read = StorageSystem.read(c);
      Properties p = new Properties();
      PGProperty.USER.set(p, server.user());
      PGProperty.PASSWORD.set(p, server.password());
      PGProperty.REPLICATION.set(p, "database");
      PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "9.4");
      PGProperty.PREFER_QUERY_MODE.set(p, "simple");
      try (Connection replication = DriverManager.getConnection(db.url(), p);
          Statement s = replication.createStatement();
          ResultSet rs = s.executeQuery("IDENTIFY_SYSTEM")) {
        rs.next();
        assertThat(Long.toUnsignedString(read.systemIdentifier())).isEqualTo(rs.getString(1));
        assertThat(read.timeline()).isEqualTo(rs.getInt(2));
      }
      assertThat(read.describe()).startsWith("system ").contains("timeline " + read.timeline());
    }
  }

  @Test
  void settlingNeedsNoStandbysForOneCopyAndGivesUpWithoutThem() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("storage_settle")) {
      PGSimpleDataSource data = new PGSimpleDataSource();
      data.setUrl(db.url());
      data.setUser(db.server().user());
      data.setPassword(db.server().password());
      var io = Executors.newSingleThreadExecutor();
      try {
        StorageSystem.settled(data, 0, Duration.ofSeconds(1), io)
            .toCompletableFuture()
            .get(5, TimeUnit.SECONDS);
        CompletableFuture<Void> two =
            StorageSystem.settled(data, 1, Duration.ofMillis(300), io).toCompletableFuture();
        assertThat(two)
            .as("no standby streams here: the wait ends in a failure, not for ever")
            .failsWithin(Duration.ofSeconds(10));
      } finally {
        io.shutdownNow();
      }
    }
  }
}
