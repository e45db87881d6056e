package io.weir.protocol.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.assertj.core.api.Assertions.fail;

import io.weir.protocol.Lsn;
import io.weir.protocol.pgoutput.PgOutputMessage.Begin;
import io.weir.protocol.pgoutput.PgOutputMessage.BeginPrepare;
import io.weir.protocol.pgoutput.PgOutputMessage.Commit;
import io.weir.protocol.pgoutput.PgOutputMessage.CommitPrepared;
import io.weir.protocol.pgoutput.PgOutputMessage.Insert;
import io.weir.protocol.pgoutput.PgOutputMessage.LogicalMessage;
import io.weir.protocol.pgoutput.PgOutputMessage.Origin;
import io.weir.protocol.pgoutput.PgOutputMessage.Prepare;
import io.weir.protocol.pgoutput.PgOutputMessage.Relation;
import io.weir.protocol.pgoutput.PgOutputMessage.RollbackPrepared;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamAbort;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamCommit;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamPrepare;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamStart;
import io.weir.protocol.pgoutput.PgOutputMessage.Streamable;
import io.weir.protocol.pgoutput.PgOutputMessage.Truncate;
import io.weir.protocol.pgoutput.PgOutputMessage.Type;
import io.weir.protocol.pgoutput.Rows.Change;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Decodes the messages captured from a real PostgreSQL 15 by {@code
 * src/test/resources/pgoutput/capture.sh} and checks them against the workloads that script ran.
 * Server-assigned numbers (LSNs, xids, OIDs, times) are compared with each other, never with
 * constants, so the fixtures can be regenerated.
 */
class PgOutputFixtureTest {

  static List<String> fixtures() {
    return Fixture.ALL;
  }

  @ParameterizedTest
  @MethodSource("fixtures")
  void everyCapturedMessageDecodesInOrder(String name) {
    Fixture fixture = Fixture.load(name);
    assertThat(fixture.lines()).as("fixture %s should not be empty", name).isNotEmpty();
    assertThat(fixture.decodeAll()).hasSameSizeAs(fixture.lines());
  }

  @ParameterizedTest
  @MethodSource("fixtures")
  void everyTruncationOfACapturedMessageIsADecodeError(String name) {
    Fixture fixture = Fixture.load(name);
    PgOutputDecoder decoder = new PgOutputDecoder();
    Set<String> shapes = new HashSet<>();
    for (Fixture.Line line : fixture.lines()) {
      boolean inBlock = decoder.inStreamBlock();
      PgOutputMessage message = decoder.decode(line.bytes());
      if (!shapes.add(message.type() + "/" + line.bytes().length)) {
        continue; // one message per kind and size is enough
      }
      for (int length = 0; length < line.bytes().length; length++) {
        int cut = length;
        Throwable thrown =
            catchThrowable(() -> PgOutputDecoder.decodeMessage(line.bytes(), 0, cut, inBlock));
        if (!(thrown instanceof PgOutputDecodeException)) {
          fail(
              "%s cut to %d of %d bytes should fail to decode, not give %s",
              message.type(), cut, line.bytes().length, thrown == null ? "a message" : thrown);
        }
      }
    }
  }

  @ParameterizedTest
  @MethodSource("fixtures")
  void noToStringShowsRowValuesOrMessageContent(String name) {
    List<String> secrets =
        List.of(
            "hello, weir",
            "varchar value",
            "deadbeef",
            "a0eebc99",
            "üñí",
            "second",
            "changed",
            "from origin",
            "after alter",
            "c4ca4238",
            "transactional-content",
            "in-stream-content",
            "weir.test",
            "weir.stream",
            "weir-gid",
            "prepared then",
            "12345.6789",
            "9007199254740993",
            "192.0.2.1",
            "calm");
    for (PgOutputMessage message : Fixture.load(name).decodeAll()) {
      String text = message.toString();
      for (String secret : secrets) {
        assertThat(text)
            .as("toString of a %s should not show data", message.type())
            .doesNotContain(secret);
      }
    }
  }

  @ParameterizedTest
  @MethodSource("fixtures")
  void theSlotReportsEachCommitAtItsEndLsn(String name) {
    Fixture fixture = Fixture.load(name);
    List<PgOutputMessage> messages = fixture.decodeAll();
    int commits = 0;
    for (int i = 0; i < messages.size(); i++) {
      Lsn endLsn =
          switch (messages.get(i).type()) {
            case COMMIT -> ((Commit) messages.get(i)).endLsn();
            case STREAM_COMMIT -> ((StreamCommit) messages.get(i)).endLsn();
            case COMMIT_PREPARED -> ((CommitPrepared) messages.get(i)).endLsn();
            default -> null;
          };
      if (endLsn != null) {
        commits++;
        assertThat(fixture.lines().get(i).lsn()).as("LSN column of line %d", i).isEqualTo(endLsn);
      }
    }
    assertThat(commits).isPositive();
  }

  @Nested
  class BasicProtocol1 {

    private final List<PgOutputMessage> messages = Fixture.load("basic-v1.txt").decodeAll();
    private final List<Change> changes = Rows.changes(messages);

    @Test
    void messageKindsFollowTheWorkload() {
      String kinds =
          messages.stream()
              .map(m -> String.valueOf(m.type().typeByte()))
              .collect(Collectors.joining());
      assertThat(kinds)
          .isEqualTo(
              "BYRIIIIIC" // five rows of every type, in one INSERT
                  + "BUC"
                  + "BUC"
                  + "BDC" // update, key change, delete under REPLICA IDENTITY DEFAULT
                  + "BRIIC"
                  + "BUC"
                  + "BDC" // the same under REPLICA IDENTITY FULL
                  + "BRIC"
                  + "BUC" // a TOASTed value, then an UPDATE that leaves it alone
                  + "BMC"
                  + "M"
                  + "BMC" // transactional, non-transactional, binary-content messages
                  + "BRIC"
                  + "BRIC"
                  + "BRRTC"
                  + "BRTC" // rows to truncate, then two TRUNCATEs
                  + "BORIC" // a transaction from a replication origin
                  + "BRIC"); // after ALTER TABLE ADD COLUMN: a new Relation
    }

    @Test
    void transactionsAreBalancedAndCommitWhereBeginSaid() {
      Begin open = null;
      long lastXid = -1;
      for (PgOutputMessage message : messages) {
        if (message instanceof Begin begin) {
          assertThat(open).as("transactions should not nest").isNull();
          assertThat(begin.xid()).as("xids should increase").isGreaterThan(lastXid);
          lastXid = begin.xid();
          open = begin;
        } else if (message instanceof Commit commit) {
          assertThat(open).as("a Commit should close an open transaction").isNotNull();
          assertThat(commit.commitLsn()).isEqualTo(open.finalLsn());
          assertThat(commit.endLsn().isAfter(commit.commitLsn())).isTrue();
          assertThat(commit.commitTime()).isEqualTo(open.commitTime());
          open = null;
        } else if (message instanceof LogicalMessage logical && !logical.transactional()) {
          assertThat(open).as("a non-transactional message arrives outside transactions").isNull();
        } else {
          assertThat(open).as("a %s should be inside a transaction", message.type()).isNotNull();
        }
      }
    }

    @Test
    void relationDescribesTheTableAndItsTypes() {
      Relation relation = relation(messages, "weir_types");
      Type mood = (Type) messages.get(1);
      assertThat(relation.namespace()).isEqualTo("public");
      assertThat(relation.replicaIdentity()).isEqualTo(ReplicaIdentity.DEFAULT);
      assertThat(relation.columns())
          .extracting(Relation.Column::name)
          .containsExactly(
              "id",
              "c_int2",
              "c_int8",
              "c_numeric",
              "c_float4",
              "c_float8",
              "c_bool",
              "c_text",
              "c_varchar",
              "c_bpchar",
              "c_name",
              "c_bytea",
              "c_uuid",
              "c_date",
              "c_ts",
              "c_tstz",
              "c_json",
              "c_jsonb",
              "c_inet",
              "c_mood");
      assertThat(relation.columns())
          .extracting(Relation.Column::typeOid)
          .containsExactly(
              23L,
              21L,
              20L,
              1700L,
              700L,
              701L,
              16L,
              25L,
              1043L,
              1042L,
              19L,
              17L,
              2950L,
              1082L,
              1114L,
              1184L,
              114L,
              3802L,
              869L,
              mood.typeOid());
      assertThat(relation.columns())
          .extracting(Relation.Column::partOfKey)
          .containsExactly(
              true, false, false, false, false, false, false, false, false, false, false, false,
              false, false, false, false, false, false, false, false);
      assertThat(relation.columns().get(8).typeModifier())
          .as("varchar(16) is stored as 16 + 4")
          .isEqualTo(20);
      assertThat(mood.namespace()).isEqualTo("public");
      assertThat(mood.name()).isEqualTo("weir_mood");
      assertThat(relation(messages, "weir_full").replicaIdentity()).isEqualTo(ReplicaIdentity.FULL);
    }

    @Test
    void insertedRowsConvertToTheirValues() {
      List<Map<String, Object>> inserted =
          changes.stream()
              .filter(c -> c.type() == MessageType.INSERT && c.table().equals("weir_types"))
              .map(Change::after)
              .toList();
      assertThat(inserted).containsExactly(ROW_1, ROW_2, ROW_3, ROW_4, ROW_5);
    }

    @Test
    void updatesAndDeletesUnderReplicaIdentityDefault() {
      List<Change> typeChanges =
          changes.stream()
              .filter(c -> c.table().equals("weir_types"))
              .filter(c -> c.type() != MessageType.INSERT)
              .toList();
      assertThat(typeChanges).hasSize(3);

      Change plainUpdate = typeChanges.get(0);
      assertThat(plainUpdate.before())
          .as("an update that keeps the key carries no old tuple")
          .isNull();
      assertThat(plainUpdate.after()).containsEntry("id", 1).containsEntry("c_text", "updated");

      Change keyChange = typeChanges.get(1);
      Map<String, Object> key = new LinkedHashMap<>();
      ROW_1.keySet().forEach(column -> key.put(column, null));
      key.put("id", 1);
      assertThat(keyChange.before())
          .as("a key change carries the old key, other columns NULL")
          .isEqualTo(key);
      assertThat(keyChange.after()).containsEntry("id", 10).containsEntry("c_text", "updated");

      Change delete = typeChanges.get(2);
      assertThat(delete.type()).isEqualTo(MessageType.DELETE);
      assertThat(delete.before()).containsEntry("id", 2).containsEntry("c_text", null);
    }

    @Test
    void updatesAndDeletesUnderReplicaIdentityFull() {
      List<Change> full = changes.stream().filter(c -> c.table().equals("weir_full")).toList();
      assertThat(full.get(2).type()).isEqualTo(MessageType.UPDATE);
      assertThat(full.get(2).before()).isEqualTo(Map.of("id", 1, "note", "first"));
      assertThat(full.get(2).after()).isEqualTo(Map.of("id", 1, "note", "changed"));
      assertThat(full.get(3).type()).isEqualTo(MessageType.DELETE);
      assertThat(full.get(3).before()).isEqualTo(Map.of("id", 2, "note", "second"));
    }

    @Test
    void unchangedToastValueIsAMarkerNotAValue() {
      List<Change> toast = changes.stream().filter(c -> c.table().equals("weir_toast")).toList();
      String big = (String) toast.get(0).after().get("big");
      assertThat(big).hasSize(300 * 32).startsWith("c4ca4238a0b923820dcc509a6f75849b"); // md5('1')
      assertThat(toast.get(1).after())
          .containsEntry("counter", 1)
          .containsEntry("big", Rows.UNCHANGED);
      PgOutputMessage.Update update =
          messages.stream()
              .filter(PgOutputMessage.Update.class::isInstance)
              .map(PgOutputMessage.Update.class::cast)
              .filter(u -> u.newTuple().hasUnchangedToast())
              .findFirst()
              .orElseThrow();
      assertThat(update.newTuple().kind(2)).isEqualTo(ColumnKind.UNCHANGED_TOAST);
      assertThat(update.newTuple().toString()).isEqualTo("TupleData[columns=3, kinds=ttu]");
    }

    @Test
    void logicalMessages() {
      List<LogicalMessage> logical =
          messages.stream()
              .filter(LogicalMessage.class::isInstance)
              .map(LogicalMessage.class::cast)
              .toList();
      assertThat(logical)
          .extracting(LogicalMessage::transactional)
          .containsExactly(true, false, true);
      assertThat(logical)
          .extracting(LogicalMessage::prefix)
          .containsExactly("weir.test", "weir.test", "weir.bin");
      assertThat(new String(logical.get(0).contentBytes(), StandardCharsets.UTF_8))
          .isEqualTo("transactional-content");
      assertThat(new String(logical.get(1).contentBytes(), StandardCharsets.UTF_8))
          .isEqualTo("non-transactional-content");
      assertThat(logical.get(2).contentBytes()).containsExactly(0x00, 0xFF, 0x10);
      assertThat(logical).allSatisfy(m -> assertThat(m.streamXid()).isEmpty());
    }

    @Test
    void rolledBackTransactionIsNotSent() {
      assertThat(changes)
          .noneMatch(c -> c.after() != null && Integer.valueOf(99).equals(c.after().get("id")));
    }

    @Test
    void truncates() {
      List<Truncate> truncates =
          messages.stream().filter(Truncate.class::isInstance).map(Truncate.class::cast).toList();
      assertThat(truncates).hasSize(2);
      assertThat(truncates.get(0).cascade()).isTrue();
      assertThat(truncates.get(0).restartIdentity()).isTrue();
      assertThat(truncates.get(0).relationIds())
          .containsExactly(
              relation(messages, "weir_parent").relationId(),
              relation(messages, "weir_child").relationId());
      assertThat(truncates.get(1).cascade()).isFalse();
      assertThat(truncates.get(1).restartIdentity()).isFalse();
      assertThat(truncates.get(1).relationIds())
          .containsExactly(relation(messages, "weir_full").relationId());
    }

    @Test
    void originFollowsBeginOfAReplicatedTransaction() {
      int at = indexOf(messages, MessageType.ORIGIN);
      Origin origin = (Origin) messages.get(at);
      Begin begin = (Begin) messages.get(at - 1);
      assertThat(origin.originName()).isEqualTo("weir_origin");
      assertThat(origin.originCommitLsn()).isEqualTo(Lsn.parse("0/ABCDEF"));
      assertThat(begin.commitTime())
          .as("the origin's commit time replaces the local one")
          .isEqualTo(Instant.parse("2024-01-02T03:04:05Z"));
    }

    @Test
    void addedColumnArrivesAsANewRelationBeforeTheRow() {
      List<Relation> fullShapes =
          messages.stream()
              .filter(Relation.class::isInstance)
              .map(Relation.class::cast)
              .filter(r -> r.name().equals("weir_full"))
              .toList();
      assertThat(fullShapes.get(0).columns()).hasSize(2);
      assertThat(fullShapes.get(fullShapes.size() - 1).columns())
          .extracting(Relation.Column::name)
          .containsExactly("id", "note", "extra");
      assertThat(changes.get(changes.size() - 1).after())
          .isEqualTo(Map.of("id", 8, "note", "after alter", "extra", 42));
    }
  }

  @Test
  void timestamptzTextCarriesTheSessionOffset() {
    List<Map<String, Object>> kolkata = insertedTypeRows("basic-v1-kolkata.txt");
    OffsetDateTime row1 = (OffsetDateTime) kolkata.get(0).get("c_tstz");
    OffsetDateTime row3 = (OffsetDateTime) kolkata.get(2).get("c_tstz");
    assertThat(row1)
        .isEqualTo(
            OffsetDateTime.of(2024, 1, 2, 8, 34, 5, 123_456_000, ZoneOffset.ofHoursMinutes(5, 30)));
    assertThat(row3.getOffset())
        .as("Madras mean time, an offset with seconds")
        .isEqualTo(ZoneOffset.ofHoursMinutesSeconds(5, 21, 10));
    assertThat(row3.toInstant()).isEqualTo(((OffsetDateTime) ROW_3.get("c_tstz")).toInstant());
    for (int i = 0; i < kolkata.size(); i++) {
      Map<String, Object> withoutTstz = new LinkedHashMap<>(kolkata.get(i));
      Map<String, Object> utc = new LinkedHashMap<>(EXPECTED_ROWS.get(i));
      withoutTstz.remove("c_tstz");
      utc.remove("c_tstz");
      assertThat(withoutTstz).as("row %d apart from timestamptz", i + 1).isEqualTo(utc);
    }
  }

  @Test
  void binaryColumnsConvertToTheSameValuesAsText() {
    List<PgOutputMessage> messages = Fixture.load("basic-v1-binary.txt").decodeAll();
    Insert first =
        messages.stream()
            .filter(Insert.class::isInstance)
            .map(Insert.class::cast)
            .findFirst()
            .orElseThrow();
    for (int i = 0; i < first.newTuple().size(); i++) {
      assertThat(first.newTuple().kind(i)).isEqualTo(ColumnKind.BINARY);
    }
    List<Map<String, Object>> binary = insertedTypeRows("basic-v1-binary.txt");
    for (int i = 0; i < binary.size(); i++) {
      Map<String, Object> expected = new LinkedHashMap<>(EXPECTED_ROWS.get(i));
      Map<String, Object> actual = new LinkedHashMap<>(binary.get(i));
      // Types without a conversion keep their send format, which differs from their text.
      for (String other : List.of("c_inet", "c_mood")) {
        if (expected.get(other) != null) {
          assertThat(actual.get(other)).asString().startsWith("hex:");
        }
        expected.remove(other);
        actual.remove(other);
      }
      assertThat(actual).as("row %d", i + 1).isEqualTo(expected);
    }
    assertThat(binary.get(0).get("c_mood"))
        .isEqualTo(Rows.hex("calm".getBytes(StandardCharsets.UTF_8)));
  }

  @Nested
  class StreamingProtocol2 {

    private final List<PgOutputMessage> messages = Fixture.load("stream-v2.txt").decodeAll();

    @Test
    void messagesInsideBlocksCarryTheXidOfTheirSubtransactionAndOthersNone() {
      Map<Long, Long> topLevelOfAbortedSubtransaction =
          messages.stream()
              .filter(StreamAbort.class::isInstance)
              .map(StreamAbort.class::cast)
              .filter(abort -> !abort.isTopLevel())
              .collect(Collectors.toMap(StreamAbort::subXid, StreamAbort::xid));
      Long blockXid = null;
      Set<Long> started = new HashSet<>();
      int streamedChanges = 0;
      for (PgOutputMessage message : messages) {
        if (message instanceof StreamStart start) {
          assertThat(blockXid).as("stream blocks should not nest").isNull();
          assertThat(start.firstSegment())
              .as("only a transaction's first block is marked first")
              .isEqualTo(started.add(start.xid()));
          blockXid = start.xid();
        } else if (message.type() == MessageType.STREAM_STOP) {
          assertThat(blockXid).isNotNull();
          blockXid = null;
        } else if (message instanceof Streamable streamable) {
          if (blockXid == null) {
            assertThat(streamable.streamXid()).as("%s outside a block", message.type()).isEmpty();
          } else {
            long xid = streamable.streamXid().orElseThrow();
            assertThat(xid == blockXid || blockXid.equals(topLevelOfAbortedSubtransaction.get(xid)))
                .as(
                    "%s in the block of %d carries %d: that xid or one of its subtransactions",
                    message.type(), blockXid, xid)
                .isTrue();
            streamedChanges++;
          }
        } else {
          assertThat(blockXid)
              .as("%s should arrive outside stream blocks", message.type())
              .isNull();
        }
      }
      assertThat(blockXid).isNull();
      assertThat(streamedChanges).isGreaterThan(2_000);
    }

    @Test
    void eachStreamedTransactionEndsAsItsWorkloadDid() {
      List<Long> xids =
          messages.stream()
              .filter(StreamStart.class::isInstance)
              .map(StreamStart.class::cast)
              .map(StreamStart::xid)
              .distinct()
              .toList();
      assertThat(xids).as("four big transactions were streamed").hasSize(4);
      long committed = xids.get(0);
      long subAborted = xids.get(1);
      long aborted = xids.get(2);
      long truncated = xids.get(3);

      List<StreamCommit> commits =
          messages.stream()
              .filter(StreamCommit.class::isInstance)
              .map(StreamCommit.class::cast)
              .toList();
      assertThat(commits)
          .extracting(StreamCommit::xid)
          .containsExactly(committed, subAborted, truncated);
      assertThat(commits).allSatisfy(c -> assertThat(c.endLsn().isAfter(c.commitLsn())).isTrue());

      List<StreamAbort> aborts =
          messages.stream()
              .filter(StreamAbort.class::isInstance)
              .map(StreamAbort.class::cast)
              .toList();
      assertThat(aborts).hasSize(2);
      assertThat(aborts.get(0).xid()).isEqualTo(subAborted);
      assertThat(aborts.get(0).isTopLevel())
          .as("ROLLBACK TO SAVEPOINT aborts a subtransaction")
          .isFalse();
      assertThat(aborts.get(0).subXid()).isGreaterThan(subAborted);
      assertThat(aborts.get(1)).isEqualTo(new StreamAbort(aborted, aborted));

      // A committed transaction arrives whole; of an aborted one, only what was streamed
      // before the abort was decoded.
      assertThat(streamedInserts(committed)).isEqualTo(500);
      assertThat(streamedInserts(subAborted))
          .as("rows inserted before the savepoint")
          .isEqualTo(500);
      assertThat(streamedInserts(aborts.get(0).subXid()))
          .as("rows inserted after the savepoint carry the subtransaction's xid")
          .isBetween(1L, 500L);
      assertThat(streamedInserts(aborted)).isBetween(1L, 500L);
    }

    @Test
    void streamedTransactionCarriesItsMessageUpdatesDeletesAndTruncate() {
      long first = ((StreamStart) messages.get(0)).xid();
      LogicalMessage inStream = (LogicalMessage) messages.get(1);
      assertThat(inStream.streamXid()).hasValue(first);
      assertThat(inStream.transactional()).isTrue();
      assertThat(new String(inStream.contentBytes(), StandardCharsets.UTF_8))
          .isEqualTo("in-stream-content");

      List<Change> changes = Rows.changes(messages);
      assertThat(changes)
          .filteredOn(c -> c.type() == MessageType.UPDATE)
          .extracting(Change::after)
          .containsExactly(
              Map.of("id", 1, "n", 2), Map.of("id", 2, "n", 3), Map.of("id", 3, "n", 4));
      Map<String, Object> deletedKey = new LinkedHashMap<>();
      deletedKey.put("id", 4);
      deletedKey.put("n", null);
      assertThat(changes)
          .filteredOn(c -> c.type() == MessageType.DELETE)
          .extracting(Change::before)
          .containsExactly(deletedKey);

      Truncate truncate =
          messages.stream()
              .filter(Truncate.class::isInstance)
              .map(Truncate.class::cast)
              .findFirst()
              .orElseThrow();
      assertThat(truncate.streamXid()).isPresent();
    }

    @Test
    void smallTransactionBetweenStreamsIsSentWhole() {
      int begin = indexOf(messages, MessageType.BEGIN);
      assertThat(messages.subList(begin, begin + 3))
          .extracting(PgOutputMessage::type)
          .containsExactly(MessageType.BEGIN, MessageType.INSERT, MessageType.COMMIT);
      assertThat(Rows.changes(messages.subList(0, begin + 3)))
          .last()
          .extracting(Change::after)
          .isEqualTo(Map.of("id", 9999, "n", 1));
    }

    private long streamedInserts(long xid) {
      return messages.stream()
          .filter(Insert.class::isInstance)
          .map(Insert.class::cast)
          .filter(i -> i.streamXid().isPresent() && i.streamXid().getAsLong() == xid)
          .count();
    }
  }

  @Nested
  class TwoPhaseProtocol3 {

    private final List<PgOutputMessage> messages = Fixture.load("twophase-v3.txt").decodeAll();

    @Test
    void messageKindsFollowTheWorkload() {
      List<MessageType> kinds = new ArrayList<>();
      for (PgOutputMessage message : messages) {
        boolean repeatedInsert =
            message.type() == MessageType.INSERT
                && !kinds.isEmpty()
                && kinds.get(kinds.size() - 1) == MessageType.INSERT;
        if (!repeatedInsert) {
          kinds.add(message.type());
        }
      }
      assertThat(kinds)
          .containsExactly(
              MessageType.BEGIN_PREPARE,
              MessageType.RELATION,
              MessageType.INSERT,
              MessageType.PREPARE,
              MessageType.COMMIT_PREPARED,
              MessageType.BEGIN_PREPARE,
              MessageType.INSERT,
              MessageType.PREPARE,
              MessageType.ROLLBACK_PREPARED,
              MessageType.STREAM_START,
              MessageType.RELATION,
              MessageType.INSERT,
              MessageType.STREAM_STOP,
              MessageType.STREAM_START,
              MessageType.INSERT,
              MessageType.STREAM_STOP,
              MessageType.STREAM_PREPARE,
              MessageType.COMMIT_PREPARED);
    }

    @Test
    void preparedThenCommitted() {
      BeginPrepare begin = (BeginPrepare) messages.get(0);
      Prepare prepare = (Prepare) messages.get(3);
      CommitPrepared commit = (CommitPrepared) messages.get(4);
      assertThat(begin.gid()).isEqualTo("weir-gid-commit");
      assertThat(prepare.gid()).isEqualTo(begin.gid());
      assertThat(commit.gid()).isEqualTo(begin.gid());
      assertThat(prepare.xid()).isEqualTo(begin.xid());
      assertThat(commit.xid()).isEqualTo(begin.xid());
      assertThat(prepare.prepareLsn()).isEqualTo(begin.prepareLsn());
      assertThat(prepare.endLsn()).isEqualTo(begin.endLsn());
      assertThat(prepare.prepareTime()).isEqualTo(begin.prepareTime());
      assertThat(commit.commitLsn()).isEqualTo(prepare.endLsn());
      assertThat(commit.endLsn().isAfter(commit.commitLsn())).isTrue();
      assertThat(Rows.changes(messages.subList(0, 3)).get(0).after())
          .isEqualTo(Map.of("id", 20, "note", "prepared then committed", "extra", 1));
    }

    @Test
    void preparedThenRolledBack() {
      BeginPrepare begin = (BeginPrepare) messages.get(5);
      Prepare prepare = (Prepare) messages.get(7);
      RollbackPrepared rollback = (RollbackPrepared) messages.get(8);
      assertThat(begin.gid()).isEqualTo("weir-gid-rollback");
      assertThat(rollback.gid()).isEqualTo(begin.gid());
      assertThat(rollback.xid()).isEqualTo(begin.xid());
      assertThat(rollback.prepareEndLsn()).isEqualTo(prepare.endLsn());
      assertThat(rollback.prepareTime()).isEqualTo(prepare.prepareTime());
      assertThat(rollback.rollbackEndLsn().isAfter(rollback.prepareEndLsn())).isTrue();
      assertThat(rollback.rollbackTime()).isAfterOrEqualTo(rollback.prepareTime());
    }

    @Test
    void streamedThenPreparedThenCommitted() {
      StreamPrepare prepare =
          messages.stream()
              .filter(StreamPrepare.class::isInstance)
              .map(StreamPrepare.class::cast)
              .findFirst()
              .orElseThrow();
      CommitPrepared commit = (CommitPrepared) messages.get(messages.size() - 1);
      StreamStart start =
          messages.stream()
              .filter(StreamStart.class::isInstance)
              .map(StreamStart.class::cast)
              .findFirst()
              .orElseThrow();
      assertThat(prepare.xid()).isEqualTo(start.xid());
      assertThat(prepare.gid()).isEqualTo("weir-gid-stream");
      assertThat(commit.xid()).isEqualTo(start.xid());
      assertThat(commit.gid()).isEqualTo(prepare.gid());
      assertThat(commit.commitLsn()).isEqualTo(prepare.endLsn());
      assertThat(
              messages.stream()
                  .filter(Insert.class::isInstance)
                  .map(Insert.class::cast)
                  .filter(i -> i.streamXid().isPresent()))
          .hasSize(500);
    }
  }

  // ---- helpers and the rows capture.sh inserted into weir_types ----------------------------

  private static Relation relation(List<PgOutputMessage> messages, String table) {
    return messages.stream()
        .filter(Relation.class::isInstance)
        .map(Relation.class::cast)
        .filter(r -> r.name().equals(table))
        .findFirst()
        .orElseThrow();
  }

  private static int indexOf(List<PgOutputMessage> messages, MessageType type) {
    for (int i = 0; i < messages.size(); i++) {
      if (messages.get(i).type() == type) {
        return i;
      }
    }
    throw new AssertionError("the fixture should contain a " + type + " message");
  }

  private static List<Map<String, Object>> insertedTypeRows(String fixture) {
    return Rows.changes(Fixture.load(fixture).decodeAll()).stream()
        .filter(c -> c.type() == MessageType.INSERT && c.table().equals("weir_types"))
        .map(Change::after)
        .toList();
  }

  private static final List<String> TYPE_COLUMNS =
      List.of(
          "id",
          "c_int2",
          "c_int8",
          "c_numeric",
          "c_float4",
          "c_float8",
          "c_bool",
          "c_text",
          "c_varchar",
          "c_bpchar",
          "c_name",
          "c_bytea",
          "c_uuid",
          "c_date",
          "c_ts",
          "c_tstz",
          "c_json",
          "c_jsonb",
          "c_inet",
          "c_mood");

  private static Map<String, Object> typeRow(Object... values) {
    Map<String, Object> row = new LinkedHashMap<>();
    for (int i = 0; i < values.length; i++) {
      row.put(TYPE_COLUMNS.get(i), values[i]);
    }
    return row;
  }

  private static final Map<String, Object> ROW_1 =
      typeRow(
          1,
          (short) 12345,
          9_007_199_254_740_993L,
          new BigDecimal("12345.6789"),
          1.5f,
          3.141592653589793,
          true,
          "hello, weir",
          "varchar value",
          "ab    ",
          "weir_name",
          "hex:deadbeef",
          UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
          LocalDate.of(2024, 1, 2),
          LocalDateTime.of(2024, 1, 2, 3, 4, 5, 123_456_000),
          OffsetDateTime.of(2024, 1, 2, 3, 4, 5, 123_456_000, ZoneOffset.UTC),
          "{\"k\": [1, 2]}",
          "{\"k\": [1, 2]}",
          "192.0.2.1",
          "calm");

  private static final Map<String, Object> ROW_2 =
      typeRow(
          2,
          Short.MIN_VALUE,
          Long.MIN_VALUE,
          PgSpecial.NAN,
          Float.NaN,
          Double.NEGATIVE_INFINITY,
          false,
          "",
          "üñí€😀",
          "x     ",
          "",
          "hex:",
          new UUID(0, 0),
          PgSpecial.INFINITY,
          PgSpecial.NEGATIVE_INFINITY,
          PgSpecial.INFINITY,
          "null",
          "[]",
          "2001:db8::1",
          "busy");

  private static final Map<String, Object> ROW_3 =
      typeRow(
          3,
          Short.MAX_VALUE,
          Long.MAX_VALUE,
          PgSpecial.INFINITY,
          Float.POSITIVE_INFINITY,
          Double.POSITIVE_INFINITY,
          null,
          null,
          null,
          null,
          null,
          null,
          null,
          LocalDate.of(-43, 3, 15),
          LocalDateTime.of(-43, 3, 15, 12, 0),
          OffsetDateTime.of(1890, 1, 1, 0, 0, 0, 0, ZoneOffset.UTC),
          null,
          null,
          null,
          null);

  private static final Map<String, Object> ROW_4 =
      typeRow(
          4,
          (short) 0,
          0L,
          PgSpecial.NEGATIVE_INFINITY,
          Float.NEGATIVE_INFINITY,
          -0.0d,
          null,
          null,
          null,
          null,
          null,
          null,
          null,
          LocalDate.of(5_874_897, 12, 31),
          LocalDateTime.of(294_276, 12, 31, 23, 59, 59, 999_999_000),
          PgSpecial.NEGATIVE_INFINITY,
          null,
          null,
          null,
          null);

  private static final Map<String, Object> ROW_5 =
      typeRow(
          5,
          null,
          null,
          new BigDecimal("-0.000000000000000000001"),
          Float.MIN_VALUE,
          Double.MIN_NORMAL,
          null,
          null,
          null,
          null,
          null,
          null,
          null,
          PgSpecial.NEGATIVE_INFINITY,
          PgSpecial.INFINITY,
          OffsetDateTime.of(2024, 6, 30, 23, 59, 59, 500_000_000, ZoneOffset.UTC),
          null,
          null,
          null,
          null);

  private static final List<Map<String, Object>> EXPECTED_ROWS =
      List.of(ROW_1, ROW_2, ROW_3, ROW_4, ROW_5);
}
