package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.cdc.source.ReplicationConnection;
import io.weir.persistence.cdc.source.SlotHolders;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;

/**
 * A slot held by a frozen member's walsender (ADR 0037): the holder's replication connection stays
 * open and never reads, as a SIGSTOPped process's would. Only a member the cluster downed is ended;
 * a member that is not downed, this member itself, and a connection whose name is not a member id
 * keep the slot.
 */
class SlotTakeoverIT {
  private static final Duration WAIT = Duration.ofSeconds(30);

  @Test
  void onlyTheWalsenderOfADownedMemberIsEnded() throws Exception {
    TestPostgres server = TestPostgres.server();
    try (TestPostgres.TestDatabase db = server.freshDatabase("slot_takeover");
        Connection sql = db.connect()) {
      String slot = slotOn(sql, "weir_takeover_" + ProcessHandle.current().pid());
      SourceSettings source = new SourceSettings(db.url(), server.user(), server.password());
      try {
        // Held by member 4242, which streams and then stops reading.
        Connection holder = hold(source, slot, "weir-replication 4242").connection();
        int holderPid = activePid(sql, slot);
        assertThat(holderPid).isPositive();

        assertThat(new SlotHolders("7", m -> false).endDownedHolder(sql, slot, WAIT))
            .as("a member that is not downed keeps the slot")
            .isZero();
        assertThat(new SlotHolders("4242", m -> true).endDownedHolder(sql, slot, WAIT))
            .as("this member's own connection is never ended")
            .isZero();
        assertThat(SlotHolders.NONE.endDownedHolder(sql, slot, WAIT))
            .as("a process that names no member ends nothing")
            .isZero();
        assertThat(activePid(sql, slot)).isEqualTo(holderPid);

        assertThat(new SlotHolders("7", Set.of("4242")::contains).endDownedHolder(sql, slot, WAIT))
            .as("the downed member's walsender is ended")
            .isEqualTo(holderPid);
        assertThat(activePid(sql, slot)).as("the slot is free at once").isZero();
        holder.close();

        // Not a member id: never ended, whatever the cluster says.
        Connection stranger = hold(source, slot, "weir-replication 12; other").connection();
        int strangerPid = activePid(sql, slot);
        assertThat(new SlotHolders("7", m -> true).endDownedHolder(sql, slot, WAIT)).isZero();
        assertThat(activePid(sql, slot)).isEqualTo(strangerPid);
        stranger.close();
      } finally {
        await("the slot is released").atMost(WAIT).until(() -> activePid(sql, slot) == 0);
        try (Statement s = sql.createStatement()) {
          s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
        }
      }
    }
  }

  @Test
  void aConnectionNamesItsMember() {
    assertThat(new SlotHolders("99", m -> false).applicationName())
        .isEqualTo("weir-replication 99");
    assertThat(SlotHolders.NONE.applicationName()).isEqualTo("weir-replication");
    assertThat(SlotHolders.memberOf("weir-replication 99")).isEqualTo("99");
    assertThat(SlotHolders.memberOf("weir-replication")).isNull();
    assertThat(SlotHolders.memberOf("weir-replication 9 9")).isNull();
    assertThat(SlotHolders.memberOf("psql")).isNull();
  }

  /**
   * The walsender looked at may let the slot go before it would be ended (here: its stream is
   * closed while the cluster is asked about its member, the connection staying open): it is not
   * ended, and neither is any other process the pid might name by then.
   */
  @Test
  void aHolderThatLetTheSlotGoSinceTheLookIsNotEnded() throws Exception {
    TestPostgres server = TestPostgres.server();
    try (TestPostgres.TestDatabase db = server.freshDatabase("slot_takeover_race");
        Connection sql = db.connect()) {
      String slot = slotOn(sql, "weir_takeover_race_" + ProcessHandle.current().pid());
      SourceSettings source = new SourceSettings(db.url(), server.user(), server.password());
      Held holder = hold(source, slot, "weir-replication 4242");
      try {
        int holderPid = activePid(sql, slot);
        assertThat(holderPid).isPositive();
        SlotHolders letGo =
            new SlotHolders(
                "7",
                member -> {
                  try {
                    holder.stream().close();
                  } catch (SQLException e) {
                    throw new IllegalStateException(e);
                  }
                  return true;
                });
        assertThat(letGo.endDownedHolder(sql, slot, WAIT))
            .as("a walsender that no longer holds the slot is not ended")
            .isZero();
        assertThat(activePid(sql, slot)).isZero();
        assertThat(backendAlive(sql, holderPid))
            .as("the process looked at is still running")
            .isTrue();
      } finally {
        holder.connection().close();
        await("the slot is released").atMost(WAIT).until(() -> activePid(sql, slot) == 0);
        try (Statement s = sql.createStatement()) {
          s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
        }
      }
    }
  }

  /** A table, its publication and a pgoutput slot named {@code slot} on {@code sql}'s database. */
  private static String slotOn(Connection sql, String slot) throws SQLException {
    try (Statement s = sql.createStatement()) {
      s.execute("CREATE TABLE t (id int PRIMARY KEY)");
      s.execute("CREATE PUBLICATION takeover_pub FOR TABLE t");
      s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
    }
    return slot;
  }

  private record Held(Connection connection, PGReplicationStream stream) {}

  /** A replication connection named {@code name} that starts streaming {@code slot}, then idles. */
  private static Held hold(SourceSettings source, String slot, String name) throws Exception {
    Connection c = ReplicationConnection.openReplicationSession(source, 0, name);
    PGReplicationStream stream =
        c.unwrap(PGConnection.class)
            .getReplicationAPI()
            .replicationStream()
            .logical()
            .withSlotName(slot)
            .withStartPosition(LogSequenceNumber.valueOf(0L))
            .withSlotOption("proto_version", "1")
            .withSlotOption("publication_names", "takeover_pub")
            .start();
    assertThat(stream).isNotNull();
    return new Held(c, stream);
  }

  private static boolean backendAlive(Connection sql, int pid) throws Exception {
    try (Statement s = sql.createStatement();
        ResultSet rs = s.executeQuery("SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid)) {
      rs.next();
      return rs.getInt(1) == 1;
    }
  }

  private static int activePid(Connection sql, String slot) throws Exception {
    try (Statement s = sql.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = '"
                    + slot
                    + "'")) {
      rs.next();
      return rs.getInt(1);
    }
  }
}
