package io.weir.protocol.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.weir.protocol.Lsn;
import io.weir.protocol.pgoutput.PgOutputDecodeException.Reason;
import io.weir.protocol.pgoutput.PgOutputMessage.Begin;
import io.weir.protocol.pgoutput.PgOutputMessage.BeginPrepare;
import io.weir.protocol.pgoutput.PgOutputMessage.Commit;
import io.weir.protocol.pgoutput.PgOutputMessage.CommitPrepared;
import io.weir.protocol.pgoutput.PgOutputMessage.Delete;
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
import io.weir.protocol.pgoutput.PgOutputMessage.StreamStop;
import io.weir.protocol.pgoutput.PgOutputMessage.Truncate;
import io.weir.protocol.pgoutput.PgOutputMessage.Type;
import io.weir.protocol.pgoutput.PgOutputMessage.Update;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/** Wire formats, stream-block rules and error reporting, on hand-built messages. */
class PgOutputDecoderTest {

  private static final long MAX_UINT32 = 0xFFFF_FFFFL;
  private static final long LSN_A = 0x16_B374D848L;
  private static final long LSN_B = 0x16_B374D900L;

  /** 2024-01-02T03:04:05.123456Z in microseconds since 2000-01-01. */
  private static final long MICROS = 757_479_845_123_456L;

  private static final Instant INSTANT = Instant.parse("2024-01-02T03:04:05.123456Z");

  private static PgOutputMessage decode(Wire wire) {
    return PgOutputDecoder.decodeMessage(ByteBuffer.wrap(wire.build()), false);
  }

  private static PgOutputMessage decodeInStream(Wire wire) {
    return PgOutputDecoder.decodeMessage(ByteBuffer.wrap(wire.build()), true);
  }

  private static Wire oneTextColumnTuple(String value) {
    return Wire.empty().int16(1).textColumn(value);
  }

  @Nested
  class WireFormats {

    @Test
    void begin() {
      assertThat(decode(Wire.message('B').int64(LSN_A).int64(MICROS).uint32(MAX_UINT32)))
          .isEqualTo(new Begin(Lsn.of(LSN_A), INSTANT, MAX_UINT32));
    }

    @Test
    void timestampsBeforeTheYear2000AreNegativeMicros() {
      Begin begin = (Begin) decode(Wire.message('B').int64(LSN_A).int64(-1L).uint32(1));
      assertThat(begin.commitTime()).isEqualTo(Instant.parse("1999-12-31T23:59:59.999999Z"));
    }

    @Test
    void commit() {
      assertThat(decode(Wire.message('C').int8(0).int64(LSN_A).int64(LSN_B).int64(MICROS)))
          .isEqualTo(new Commit(Lsn.of(LSN_A), Lsn.of(LSN_B), INSTANT));
    }

    @Test
    void origin() {
      assertThat(decode(Wire.message('O').int64(LSN_A).string("node_a")))
          .isEqualTo(new Origin(Lsn.of(LSN_A), "node_a"));
    }

    @Test
    void relation() {
      Wire wire =
          Wire.message('R')
              .uint32(MAX_UINT32)
              .string("")
              .string("pg_table")
              .int8('i')
              .int16(2)
              .int8(1)
              .string("id")
              .uint32(23)
              .int32(-1)
              .int8(0)
              .string("label")
              .uint32(1043)
              .int32(36);
      assertThat(decode(wire))
          .isEqualTo(
              new Relation(
                  OptionalLong.empty(),
                  MAX_UINT32,
                  "",
                  "pg_table",
                  ReplicaIdentity.INDEX,
                  List.of(
                      new Relation.Column(true, "id", 23, -1),
                      new Relation.Column(false, "label", 1043, 36))));
    }

    @Test
    void everyReplicaIdentitySetting() {
      for (ReplicaIdentity identity : ReplicaIdentity.values()) {
        Wire wire =
            Wire.message('R').uint32(1).string("s").string("t").int8(identity.wireByte()).int16(0);
        assertThat(((Relation) decode(wire)).replicaIdentity()).isEqualTo(identity);
      }
    }

    @Test
    void type() {
      assertThat(decode(Wire.message('Y').uint32(16385).string("public").string("mood")))
          .isEqualTo(new Type(OptionalLong.empty(), 16385, "public", "mood"));
    }

    @Test
    void insertWithEveryColumnKind() {
      Wire wire =
          Wire.message('I')
              .uint32(7)
              .int8('N')
              .int16(4)
              .int8('n')
              .int8('u')
              .textColumn("42")
              .int8('b')
              .int32(2)
              .int8(0xCA)
              .int8(0xFE);
      Insert insert = (Insert) decode(wire);
      TupleData tuple = insert.newTuple();
      assertThat(insert.relationId()).isEqualTo(7);
      assertThat(tuple.size()).isEqualTo(4);
      assertThat(List.of(tuple.kind(0), tuple.kind(1), tuple.kind(2), tuple.kind(3)))
          .containsExactly(
              ColumnKind.NULL, ColumnKind.UNCHANGED_TOAST, ColumnKind.TEXT, ColumnKind.BINARY);
      assertThat(tuple.isNull(0)).isTrue();
      assertThat(tuple.isUnchangedToast(1)).isTrue();
      assertThat(tuple.hasUnchangedToast()).isTrue();
      assertThat(tuple.text(2)).isEqualTo("42");
      assertThat(tuple.bytes(3)).containsExactly(0xCA, 0xFE);
      assertThat(tuple.length(2)).isEqualTo(2);
      assertThat(tuple.length(0)).isZero();
      assertThat(tuple.value(0, 23)).isNull();
      assertThat(tuple.value(2, 23).value()).isEqualTo(42);
      assertThat(tuple.value(3, 21).value()).isEqualTo((short) 0xCAFE);
    }

    @Test
    void updateWithoutOldTuple() {
      Update update =
          (Update)
              decode(Wire.message('U').uint32(7).int8('N').bytes(oneTextColumnTuple("b").build()));
      assertThat(update.oldTupleKind()).isEqualTo(OldTupleKind.NONE);
      assertThat(update.old()).isEmpty();
      assertThat(update.newTuple().text(0)).isEqualTo("b");
    }

    @Test
    void updateWithKeyOrFullOldTuple() {
      for (char marker : new char[] {'K', 'O'}) {
        Wire wire =
            Wire.message('U')
                .uint32(7)
                .int8(marker)
                .bytes(oneTextColumnTuple("a").build())
                .int8('N')
                .bytes(oneTextColumnTuple("b").build());
        Update update = (Update) decode(wire);
        assertThat(update.oldTupleKind())
            .isEqualTo(marker == 'K' ? OldTupleKind.KEY : OldTupleKind.FULL);
        assertThat(update.oldTuple().text(0)).isEqualTo("a");
        assertThat(update.newTuple().text(0)).isEqualTo("b");
      }
    }

    @Test
    void deleteWithKeyOrFullOldTuple() {
      Delete key =
          (Delete)
              decode(Wire.message('D').uint32(7).int8('K').bytes(oneTextColumnTuple("a").build()));
      Delete full =
          (Delete)
              decode(Wire.message('D').uint32(7).int8('O').bytes(oneTextColumnTuple("a").build()));
      assertThat(key.oldTupleKind()).isEqualTo(OldTupleKind.KEY);
      assertThat(full.oldTupleKind()).isEqualTo(OldTupleKind.FULL);
      assertThat(full.oldTuple()).isEqualTo(key.oldTuple());
    }

    @Test
    void truncateOptionsAndRelations() {
      assertThat(decode(Wire.message('T').int32(2).int8(3).uint32(10).uint32(MAX_UINT32)))
          .isEqualTo(new Truncate(OptionalLong.empty(), true, true, List.of(10L, MAX_UINT32)));
      assertThat(decode(Wire.message('T').int32(1).int8(1).uint32(10)))
          .isEqualTo(new Truncate(OptionalLong.empty(), true, false, List.of(10L)));
      assertThat(decode(Wire.message('T').int32(1).int8(2).uint32(10)))
          .isEqualTo(new Truncate(OptionalLong.empty(), false, true, List.of(10L)));
    }

    @Test
    void logicalMessage() {
      byte[] content = {0, 1, 2, (byte) 0xFF};
      Wire wire =
          Wire.message('M')
              .int8(1)
              .int64(LSN_A)
              .string("app.prefix")
              .int32(content.length)
              .bytes(content);
      LogicalMessage message = (LogicalMessage) decode(wire);
      assertThat(message.transactional()).isTrue();
      assertThat(message.lsn()).isEqualTo(Lsn.of(LSN_A));
      assertThat(message.prefix()).isEqualTo("app.prefix");
      assertThat(message.contentBytes()).containsExactly(content);
      assertThat(message.streamXid()).isEmpty();

      LogicalMessage nonTransactional =
          (LogicalMessage) decode(Wire.message('M').int8(0).int64(LSN_A).string("p").int32(0));
      assertThat(nonTransactional.transactional()).isFalse();
      assertThat(nonTransactional.content().remaining()).isZero();
    }

    @Test
    void logicalMessageContentCannotBeChangedThroughTheRecord() {
      LogicalMessage message =
          (LogicalMessage)
              decode(Wire.message('M').int8(1).int64(LSN_A).string("p").int32(1).int8(9));
      message.content().get();
      assertThat(message.content().isReadOnly()).isTrue();
      assertThat(message.content().remaining())
          .as("each call should return a fresh view")
          .isEqualTo(1);
      message.contentBytes()[0] = 0;
      assertThat(message.contentBytes()).containsExactly(9);
    }

    @Test
    void streamControlMessages() {
      assertThat(decode(Wire.message('S').uint32(MAX_UINT32).int8(1)))
          .isEqualTo(new StreamStart(MAX_UINT32, true));
      assertThat(decode(Wire.message('S').uint32(5).int8(0))).isEqualTo(new StreamStart(5, false));
      assertThat(decodeInStream(Wire.message('E'))).isEqualTo(new StreamStop());
      assertThat(
              decode(Wire.message('c').uint32(5).int8(0).int64(LSN_A).int64(LSN_B).int64(MICROS)))
          .isEqualTo(new StreamCommit(5, Lsn.of(LSN_A), Lsn.of(LSN_B), INSTANT));
      StreamAbort sub = (StreamAbort) decode(Wire.message('A').uint32(5).uint32(6));
      assertThat(sub).isEqualTo(new StreamAbort(5, 6));
      assertThat(sub.isTopLevel()).isFalse();
      assertThat(((StreamAbort) decode(Wire.message('A').uint32(5).uint32(5))).isTopLevel())
          .isTrue();
    }

    @Test
    void twoPhaseMessages() {
      assertThat(
              decode(
                  Wire.message('b')
                      .int64(LSN_A)
                      .int64(LSN_B)
                      .int64(MICROS)
                      .uint32(9)
                      .string("gid-1")))
          .isEqualTo(new BeginPrepare(Lsn.of(LSN_A), Lsn.of(LSN_B), INSTANT, 9, "gid-1"));
      assertThat(
              decode(
                  Wire.message('P')
                      .int8(0)
                      .int64(LSN_A)
                      .int64(LSN_B)
                      .int64(MICROS)
                      .uint32(9)
                      .string("gid-1")))
          .isEqualTo(new Prepare(Lsn.of(LSN_A), Lsn.of(LSN_B), INSTANT, 9, "gid-1"));
      assertThat(
              decode(
                  Wire.message('K')
                      .int8(0)
                      .int64(LSN_A)
                      .int64(LSN_B)
                      .int64(MICROS)
                      .uint32(9)
                      .string("gid-1")))
          .isEqualTo(new CommitPrepared(Lsn.of(LSN_A), Lsn.of(LSN_B), INSTANT, 9, "gid-1"));
      assertThat(
              decode(
                  Wire.message('r')
                      .int8(0)
                      .int64(LSN_A)
                      .int64(LSN_B)
                      .int64(MICROS)
                      .int64(MICROS + 1)
                      .uint32(9)
                      .string("gid-1")))
          .isEqualTo(
              new RollbackPrepared(
                  Lsn.of(LSN_A), Lsn.of(LSN_B), INSTANT, INSTANT.plusNanos(1_000), 9, "gid-1"));
      assertThat(
              decode(
                  Wire.message('p')
                      .int8(0)
                      .int64(LSN_A)
                      .int64(LSN_B)
                      .int64(MICROS)
                      .uint32(9)
                      .string("gid-1")))
          .isEqualTo(new StreamPrepare(Lsn.of(LSN_A), Lsn.of(LSN_B), INSTANT, 9, "gid-1"));
    }

    @Test
    void everyMessageTypeRoundTripsItsTypeByte() {
      for (MessageType type : MessageType.values()) {
        assertThat(MessageType.forType(type.typeByte())).contains(type);
      }
      assertThat(MessageType.forType('Z')).isEmpty();
      assertThat(MessageType.forType('\u00FF')).isEmpty();
      assertThat(MessageType.forType('\uFFFF')).isEmpty();
    }
  }

  @Nested
  class StreamBlocks {

    private final Wire streamedInsert =
        Wire.message('I').uint32(77).uint32(7).int8('N').bytes(oneTextColumnTuple("v").build());

    @Test
    void messagesInsideABlockCarryTheStreamedXid() {
      Insert insert = (Insert) decodeInStream(streamedInsert);
      assertThat(insert.streamXid()).hasValue(77);
      assertThat(insert.relationId()).isEqualTo(7);
      assertThat(
              ((Relation)
                      decodeInStream(
                          Wire.message('R')
                              .uint32(77)
                              .uint32(7)
                              .string("s")
                              .string("t")
                              .int8('d')
                              .int16(0)))
                  .streamXid())
          .hasValue(77);
      assertThat(
              ((Type)
                      decodeInStream(
                          Wire.message('Y').uint32(77).uint32(16385).string("s").string("t")))
                  .streamXid())
          .hasValue(77);
      assertThat(
              ((Truncate) decodeInStream(Wire.message('T').uint32(77).int32(0).int8(0)))
                  .streamXid())
          .hasValue(77);
      assertThat(
              ((LogicalMessage)
                      decodeInStream(
                          Wire.message('M').uint32(77).int8(1).int64(LSN_A).string("p").int32(0)))
                  .streamXid())
          .hasValue(77);
      assertThat(
              ((Update)
                      decodeInStream(
                          Wire.message('U')
                              .uint32(77)
                              .uint32(7)
                              .int8('N')
                              .bytes(oneTextColumnTuple("v").build())))
                  .streamXid())
          .hasValue(77);
      assertThat(
              ((Delete)
                      decodeInStream(
                          Wire.message('D')
                              .uint32(77)
                              .uint32(7)
                              .int8('K')
                              .bytes(oneTextColumnTuple("v").build())))
                  .streamXid())
          .hasValue(77);
    }

    @Test
    void originInsideABlockCarriesNoXid() {
      assertThat(decodeInStream(Wire.message('O').int64(LSN_A).string("node_a")))
          .isEqualTo(new Origin(Lsn.of(LSN_A), "node_a"));
    }

    @Test
    void theSameBytesOutsideABlockDoNotDecode() {
      // Read without the xid, the relation id 77 is followed by 7 as the tuple marker.
      assertDecodeError(
          () -> decode(streamedInsert), MessageType.INSERT, 5, Reason.UNKNOWN_TUPLE_MARKER);
    }

    @Test
    void theDecoderTracksBlocks() {
      PgOutputDecoder decoder = new PgOutputDecoder();
      assertThat(decoder.inStreamBlock()).isFalse();
      decoder.decode(Wire.message('S').uint32(77).int8(1).build());
      assertThat(decoder.inStreamBlock()).isTrue();
      assertThat(((Insert) decoder.decode(streamedInsert.build())).streamXid()).hasValue(77);
      decoder.decode(Wire.message('E').build());
      assertThat(decoder.inStreamBlock()).isFalse();
      Insert plain =
          (Insert)
              decoder.decode(
                  Wire.message('I')
                      .uint32(7)
                      .int8('N')
                      .bytes(oneTextColumnTuple("v").build())
                      .build());
      assertThat(plain.streamXid()).isEmpty();
    }

    @Test
    void messagesThatCannotBeInsideABlockAreRejectedThere() {
      List<Wire> outsideOnly =
          List.of(
              Wire.message('B').int64(LSN_A).int64(MICROS).uint32(1),
              Wire.message('C').int8(0).int64(LSN_A).int64(LSN_B).int64(MICROS),
              Wire.message('S').uint32(5).int8(0),
              Wire.message('c').uint32(5).int8(0).int64(LSN_A).int64(LSN_B).int64(MICROS),
              Wire.message('A').uint32(5).uint32(5),
              Wire.message('b').int64(LSN_A).int64(LSN_B).int64(MICROS).uint32(9).string("g"),
              Wire.message('P')
                  .int8(0)
                  .int64(LSN_A)
                  .int64(LSN_B)
                  .int64(MICROS)
                  .uint32(9)
                  .string("g"),
              Wire.message('K')
                  .int8(0)
                  .int64(LSN_A)
                  .int64(LSN_B)
                  .int64(MICROS)
                  .uint32(9)
                  .string("g"),
              Wire.message('r')
                  .int8(0)
                  .int64(LSN_A)
                  .int64(LSN_B)
                  .int64(MICROS)
                  .int64(MICROS)
                  .uint32(9)
                  .string("g"),
              Wire.message('p')
                  .int8(0)
                  .int64(LSN_A)
                  .int64(LSN_B)
                  .int64(MICROS)
                  .uint32(9)
                  .string("g"));
      for (Wire wire : outsideOnly) {
        MessageType type = decode(wire).type();
        assertDecodeError(() -> decodeInStream(wire), type, 0, Reason.UNEXPECTED_IN_STREAM_BLOCK);
      }
    }

    @Test
    void streamStopOutsideABlockIsRejected() {
      assertDecodeError(
          () -> decode(Wire.message('E')),
          MessageType.STREAM_STOP,
          0,
          Reason.UNEXPECTED_OUTSIDE_STREAM_BLOCK);
    }

    @Test
    void aFailedMessageLeavesTheDecoderStateAsItWas() {
      PgOutputDecoder decoder = new PgOutputDecoder();
      decoder.decode(Wire.message('S').uint32(77).int8(1).build());
      assertThatThrownBy(() -> decoder.decode(Wire.message('S').uint32(78).int8(1).build()))
          .isInstanceOf(PgOutputDecodeException.class);
      assertThat(decoder.inStreamBlock()).isTrue();
      assertThatThrownBy(() -> decoder.decode(Wire.message('E').int8(0).build()))
          .isInstanceOf(PgOutputDecodeException.class);
      assertThat(decoder.inStreamBlock())
          .as("a Stream Stop with trailing bytes should not end the block")
          .isTrue();
    }
  }

  @Nested
  class Errors {

    @Test
    void emptyInput() {
      assertDecodeError(() -> decode(Wire.empty()), null, 0, Reason.EMPTY_MESSAGE);
    }

    @Test
    void unknownTypeByte() {
      assertDecodeError(
          () -> decode(Wire.message('Z').int32(1)), null, 0, Reason.UNKNOWN_MESSAGE_TYPE);
      assertDecodeError(
          () -> decode(Wire.empty().int8(0xC2)), null, 0, Reason.UNKNOWN_MESSAGE_TYPE);
    }

    @Test
    void truncatedField() {
      assertDecodeError(
          () -> decode(Wire.message('B').int64(LSN_A).int32(0)),
          MessageType.BEGIN,
          9,
          Reason.TRUNCATED);
    }

    @Test
    void trailingBytes() {
      assertDecodeError(
          () -> decode(Wire.message('A').uint32(5).uint32(5).int8(0)),
          MessageType.STREAM_ABORT,
          9,
          Reason.TRAILING_BYTES);
    }

    @Test
    void unterminatedString() {
      Wire wire =
          Wire.message('O').int64(LSN_A).bytes("no-terminator".getBytes(StandardCharsets.UTF_8));
      assertDecodeError(() -> decode(wire), MessageType.ORIGIN, 9, Reason.UNTERMINATED_STRING);
    }

    @Test
    void invalidUtf8InAString() {
      Wire wire = Wire.message('O').int64(LSN_A).int8('a').int8(0xC3).int8(0x28).int8(0);
      assertDecodeError(() -> decode(wire), MessageType.ORIGIN, 9, Reason.INVALID_UTF8);
    }

    @Test
    void aStringSpellingTheReplacementCharacterIsValid() {
      Origin origin = (Origin) decode(Wire.message('O').int64(LSN_A).string("a\uFFFDb"));
      assertThat(origin.originName()).isEqualTo("a\uFFFDb");
    }

    @Test
    void negativeTupleColumnCount() {
      Wire wire = Wire.message('I').uint32(7).int8('N').int16(-1);
      assertDecodeError(() -> decode(wire), MessageType.INSERT, 6, Reason.NEGATIVE_LENGTH);
    }

    @Test
    void tupleColumnCountBeyondTheMessage() {
      Wire wire = Wire.message('I').uint32(7).int8('N').int16(3).int8('n').int8('n');
      assertDecodeError(() -> decode(wire), MessageType.INSERT, 6, Reason.LENGTH_EXCEEDS_MESSAGE);
    }

    @Test
    void negativeColumnLength() {
      Wire wire = Wire.message('I').uint32(7).int8('N').int16(1).int8('t').int32(-5);
      assertDecodeError(() -> decode(wire), MessageType.INSERT, 9, Reason.NEGATIVE_LENGTH);
    }

    @Test
    void hugeColumnLengthIsAnErrorNotAnAllocation() {
      Wire wire =
          Wire.message('I').uint32(7).int8('N').int16(1).int8('b').int32(Integer.MAX_VALUE).int8(1);
      assertDecodeError(() -> decode(wire), MessageType.INSERT, 9, Reason.LENGTH_EXCEEDS_MESSAGE);
    }

    @Test
    void unknownColumnKind() {
      Wire wire = Wire.message('I').uint32(7).int8('N').int16(2).int8('n').int8('x');
      assertDecodeError(() -> decode(wire), MessageType.INSERT, 9, Reason.UNKNOWN_COLUMN_KIND);
    }

    @Test
    void wrongTupleMarkers() {
      byte[] tuple = oneTextColumnTuple("v").build();
      assertDecodeError(
          () -> decode(Wire.message('I').uint32(7).int8('K').bytes(tuple)),
          MessageType.INSERT,
          5,
          Reason.UNKNOWN_TUPLE_MARKER);
      assertDecodeError(
          () -> decode(Wire.message('U').uint32(7).int8('X').bytes(tuple)),
          MessageType.UPDATE,
          5,
          Reason.UNKNOWN_TUPLE_MARKER);
      assertDecodeError(
          () -> decode(Wire.message('U').uint32(7).int8('K').bytes(tuple).int8('K').bytes(tuple)),
          MessageType.UPDATE,
          5 + 1 + tuple.length,
          Reason.UNKNOWN_TUPLE_MARKER);
      assertDecodeError(
          () -> decode(Wire.message('D').uint32(7).int8('N').bytes(tuple)),
          MessageType.DELETE,
          5,
          Reason.UNKNOWN_TUPLE_MARKER);
    }

    @Test
    void unknownReplicaIdentity() {
      Wire wire = Wire.message('R').uint32(1).string("s").string("t").int8('z').int16(0);
      assertDecodeError(
          () -> decode(wire), MessageType.RELATION, 9, Reason.UNKNOWN_REPLICA_IDENTITY);
    }

    @Test
    void relationColumnCountBeyondTheMessage() {
      Wire wire =
          Wire.message('R').uint32(1).string("s").string("t").int8('d').int16(Short.MAX_VALUE);
      assertDecodeError(
          () -> decode(wire), MessageType.RELATION, 10, Reason.LENGTH_EXCEEDS_MESSAGE);
    }

    @Test
    void truncateCounts() {
      assertDecodeError(
          () -> decode(Wire.message('T').int32(-1).int8(0)),
          MessageType.TRUNCATE,
          1,
          Reason.NEGATIVE_LENGTH);
      assertDecodeError(
          () -> decode(Wire.message('T').int32(Integer.MAX_VALUE).int8(0).uint32(1)),
          MessageType.TRUNCATE,
          1,
          Reason.LENGTH_EXCEEDS_MESSAGE);
    }

    @Test
    void logicalMessageContentBeyondTheMessage() {
      Wire wire = Wire.message('M').int8(1).int64(LSN_A).string("p").int32(100).int8(1);
      assertDecodeError(() -> decode(wire), MessageType.MESSAGE, 12, Reason.LENGTH_EXCEEDS_MESSAGE);
    }

    @Test
    void columnCountDifferentFromTheRelation() {
      Relation relation =
          new Relation(
              OptionalLong.empty(),
              7,
              "s",
              "t",
              ReplicaIdentity.DEFAULT,
              List.of(
                  new Relation.Column(true, "a", 23, -1), new Relation.Column(false, "b", 23, -1)));
      Insert insert =
          (Insert)
              decode(Wire.message('I').uint32(7).int8('N').bytes(oneTextColumnTuple("1").build()));
      assertDecodeError(
          () -> insert.newTuple().value(0, relation),
          MessageType.INSERT,
          6,
          Reason.COLUMN_COUNT_MISMATCH);
      assertDecodeError(
          () -> insert.newTuple().requireColumnCount(relation),
          MessageType.INSERT,
          6,
          Reason.COLUMN_COUNT_MISMATCH);
    }

    @Test
    void valueThatDoesNotParseForItsType() {
      Wire wire =
          Wire.message('I')
              .uint32(7)
              .int8('N')
              .int16(2)
              .int8('n')
              .textColumn("CANARY-not-a-number");
      TupleData tuple = ((Insert) decode(wire)).newTuple();
      PgOutputDecodeException error =
          assertDecodeError(() -> tuple.value(1, 23), MessageType.INSERT, 14, Reason.INVALID_VALUE);
      assertThat(error.getMessage()).doesNotContain("CANARY");
      assertThat(tuple.value(1, 25).value()).isEqualTo("CANARY-not-a-number");
    }

    @Test
    void invalidUtf8InATextColumn() {
      Wire wire =
          Wire.message('I').uint32(7).int8('N').int16(1).int8('t').int32(2).int8(0xFF).int8(0xFE);
      TupleData tuple = ((Insert) decode(wire)).newTuple();
      assertDecodeError(() -> tuple.text(0), MessageType.INSERT, 13, Reason.INVALID_UTF8);
      assertDecodeError(() -> tuple.value(0, 25), MessageType.INSERT, 13, Reason.INVALID_UTF8);
    }

    @Test
    void misuseOfAColumnIsAnIllegalStateNotADecodeError() {
      Wire wire = Wire.message('I').uint32(7).int8('N').int16(2).int8('u').int8('n');
      TupleData tuple = ((Insert) decode(wire)).newTuple();
      assertThatThrownBy(() -> tuple.value(0, 25))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("unchanged TOAST");
      assertThatThrownBy(() -> tuple.text(1)).isInstanceOf(IllegalStateException.class);
      assertThatThrownBy(() -> tuple.bytes(1)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void messageTextNamesTypeOffsetAndReasonOnly() {
      PgOutputDecodeException error =
          assertDecodeError(
              () -> decode(Wire.message('B').int8(1)), MessageType.BEGIN, 1, Reason.TRUNCATED);
      assertThat(error.getMessage())
          .isEqualTo(
              "cannot decode pgoutput BEGIN message at byte offset 1: "
                  + Reason.TRUNCATED.description()
                  + " (TRUNCATED)");
      assertThat(error.getCause()).isNull();
      PgOutputDecodeException unknown =
          assertDecodeError(() -> decode(Wire.message('?')), null, 0, Reason.UNKNOWN_MESSAGE_TYPE);
      assertThat(unknown.getMessage()).contains("pgoutput unknown message");
    }
  }

  @Nested
  class Buffers {

    private final byte[] message =
        Wire.message('I').uint32(7).int8('N').bytes(oneTextColumnTuple("value").build()).build();

    @Test
    void decodesTheRemainingBytesOfASliceAndLeavesItsPositionAlone() {
      byte[] padded = new byte[message.length + 6];
      System.arraycopy(message, 0, padded, 4, message.length);
      ByteBuffer buffer = ByteBuffer.wrap(padded, 2, message.length + 3).slice(); // arrayOffset 2
      buffer.position(2).limit(2 + message.length);
      Insert insert = (Insert) PgOutputDecoder.decodeMessage(buffer, false);
      assertThat(insert.newTuple().text(0)).isEqualTo("value");
      assertThat(buffer.position()).isEqualTo(2);
      assertThat(buffer.limit()).isEqualTo(2 + message.length);
    }

    @Test
    void decodesDirectAndReadOnlyBuffers() {
      ByteBuffer direct = ByteBuffer.allocateDirect(message.length).put(message).flip();
      ByteBuffer readOnly = ByteBuffer.wrap(message).asReadOnlyBuffer();
      PgOutputMessage expected = new PgOutputDecoder().decode(message);
      assertThat(PgOutputDecoder.decodeMessage(direct, false)).isEqualTo(expected);
      assertThat(PgOutputDecoder.decodeMessage(readOnly, false)).isEqualTo(expected);
      assertThat(direct.position()).isZero();
    }

    @Test
    void decodedTuplesDoNotShareTheCallersBuffer() {
      byte[] reused = message.clone();
      Insert insert = (Insert) new PgOutputDecoder().decode(reused);
      Arrays.fill(reused, (byte) 0);
      assertThat(insert.newTuple().text(0)).isEqualTo("value");
    }

    @Test
    void decodesAnArrayRange() {
      byte[] padded = new byte[message.length + 2];
      System.arraycopy(message, 0, padded, 1, message.length);
      assertThat(new PgOutputDecoder().decode(padded, 1, message.length))
          .isEqualTo(new PgOutputDecoder().decode(message));
    }
  }

  private static PgOutputDecodeException assertDecodeError(
      ThrowingCallable call, MessageType type, int offset, Reason reason) {
    Throwable thrown = catchThrowable(call);
    assertThat(thrown)
        .as("decoding should fail with a PgOutputDecodeException")
        .isInstanceOf(PgOutputDecodeException.class);
    PgOutputDecodeException error = (PgOutputDecodeException) thrown;
    assertThat(error.reason()).as("reason").isEqualTo(reason);
    assertThat(error.messageType()).as("message type").isEqualTo(Optional.ofNullable(type));
    assertThat(error.offset()).as("byte offset").isEqualTo(offset);
    return error;
  }
}
