package io.weir.protocol.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.weir.protocol.pgoutput.PgOutputMessage.Delete;
import io.weir.protocol.pgoutput.PgOutputMessage.Insert;
import io.weir.protocol.pgoutput.PgOutputMessage.Update;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Throws random bytes and mutated captures at the decoder and at the value conversions of whatever
 * still decodes. Each input must either decode or fail with {@link PgOutputDecodeException}, and no
 * exception message may contain the canary string that the mutations plant in the inputs.
 *
 * <p>The default run makes 100,000 inputs. To search longer, raise the count with the system
 * property {@code weir.fuzz.iterations}, and pick another sequence with {@code weir.fuzz.seed} (a
 * long; the default is fixed so that a normal build is repeatable):
 *
 * <pre>
 * mvn -o -pl protocol test -Dtest=PgOutputDecoderFuzzTest -Dweir.fuzz.iterations=5000000 -Dweir.fuzz.seed=42
 * </pre>
 *
 * A failure names the seed, the iteration and the input in hex, so it can be replayed.
 */
class PgOutputDecoderFuzzTest {

  private static final int DEFAULT_ITERATIONS = 100_000;
  private static final long DEFAULT_SEED = 0x5EED_CAFEL;
  private static final String CANARY = "CANARY-7f3a9c";
  private static final byte[] CANARY_BYTES = CANARY.getBytes(StandardCharsets.US_ASCII);
  private static final int MAX_RANDOM_LENGTH = 64;
  private static final byte[] STRUCTURAL_BYTES = {
    'n', 'u', 't', 'b', 'N', 'K', 'O', 0, (byte) 0xFF, (byte) 0x80
  };
  private static final int[] INTERESTING_INTS = {
    0,
    1,
    -1,
    2,
    3,
    4,
    7,
    8,
    16,
    255,
    0x7FFF,
    0x8000,
    0xFFFF,
    Integer.MAX_VALUE,
    Integer.MIN_VALUE,
    0x7FFF_FFFE
  };
  private static final long[] TYPE_OIDS = {
    16, 17, 19, 20, 21, 23, 25, 114, 700, 701, 869, 1042, 1043, 1082, 1114, 1184, 1700, 2950, 3802,
    16385
  };

  private final List<byte[]> corpus = corpus();
  private final byte[] typeBytes = typeBytes();

  @Test
  void everyInputDecodesOrFailsWithADecodeErrorThatDoesNotLeakTheCanary() {
    int iterations = Integer.getInteger("weir.fuzz.iterations", DEFAULT_ITERATIONS);
    long seed = Long.getLong("weir.fuzz.seed", DEFAULT_SEED);
    Random random = new Random(seed);
    int decoded = 0;
    int rejected = 0;
    for (int i = 0; i < iterations; i++) {
      byte[] input = nextInput(random);
      boolean inStreamBlock = random.nextInt(4) == 0;
      try {
        PgOutputMessage message =
            PgOutputDecoder.decodeMessage(ByteBuffer.wrap(input), inStreamBlock);
        decoded++;
        exercise(message, random);
      } catch (PgOutputDecodeException e) {
        rejected++;
        checkDecodeError(e, input.length, seed, i, input);
      } catch (RuntimeException | Error e) {
        fail(
            "seed %d, iteration %d: %s escaped for input %s",
            seed, i, e, HexFormat.of().formatHex(input));
      }
    }
    assertThat(decoded)
        .as("some mutated inputs should still decode, or the fuzzing is too shallow")
        .isGreaterThan(iterations / 50);
    assertThat(rejected).as("most mutated inputs should be rejected").isGreaterThan(iterations / 4);
  }

  /** Reads every part of a decoded message, converting tuple columns with random type OIDs. */
  private static void exercise(PgOutputMessage message, Random random) {
    assertThat(message.toString()).isNotNull();
    if (message instanceof Insert insert) {
      exercise(insert.newTuple(), random);
    } else if (message instanceof Update update) {
      update.old().ifPresent(old -> exercise(old, random));
      exercise(update.newTuple(), random);
    } else if (message instanceof Delete delete) {
      exercise(delete.oldTuple(), random);
    }
  }

  private static void exercise(TupleData tuple, Random random) {
    for (int column = 0; column < tuple.size(); column++) {
      if (tuple.isUnchangedToast(column)) {
        continue; // has no value by design; asking for one is a caller error
      }
      try {
        if (tuple.kind(column) == ColumnKind.TEXT) {
          tuple.text(column);
        }
        tuple.value(column, TYPE_OIDS[random.nextInt(TYPE_OIDS.length)]);
      } catch (PgOutputDecodeException e) {
        assertThat(e.getMessage()).doesNotContain(CANARY);
      }
    }
  }

  private static void checkDecodeError(
      PgOutputDecodeException e, int length, long seed, int i, byte[] input) {
    if (e.getMessage().contains(CANARY)
        || e.offset() < 0
        || e.offset() > length
        || e.getCause() != null) {
      fail(
          "seed %d, iteration %d: bad decode error %s for input %s",
          seed, i, e.getMessage(), HexFormat.of().formatHex(input));
    }
  }

  // ---- inputs --------------------------------------------------------------------------------

  private byte[] nextInput(Random random) {
    if (random.nextInt(10) == 0) {
      return randomBytes(random);
    }
    byte[] input = corpus.get(random.nextInt(corpus.size()));
    int mutations = 1 + random.nextInt(3);
    for (int m = 0; m < mutations; m++) {
      input = mutate(input, random);
    }
    return input;
  }

  private byte[] randomBytes(Random random) {
    byte[] bytes = new byte[random.nextInt(MAX_RANDOM_LENGTH + 1)];
    random.nextBytes(bytes);
    if (bytes.length > 0 && random.nextInt(4) != 0) {
      bytes[0] = typeBytes[random.nextInt(typeBytes.length)];
    }
    return bytes;
  }

  private byte[] mutate(byte[] input, Random random) {
    int length = input.length;
    int at = length == 0 ? 0 : random.nextInt(length);
    return switch (random.nextInt(9)) {
      case 0 -> { // flip bits
        byte[] out = input.clone();
        for (int flips = 1 + random.nextInt(4); flips > 0 && length > 0; flips--) {
          out[random.nextInt(length)] ^= (byte) (1 << random.nextInt(8));
        }
        yield out;
      }
      case 1 -> Arrays.copyOf(input, random.nextInt(length + 1)); // truncate
      case 2 -> insert(input, at, randomBytes(random, 1 + random.nextInt(16)));
      case 3 -> insert(input, at, CANARY_BYTES);
      case 4 -> overwrite(input, at, CANARY_BYTES);
      case 5 -> { // delete a range
        int end = Math.min(length, at + 1 + random.nextInt(8));
        byte[] out = new byte[length - (end - at)];
        System.arraycopy(input, 0, out, 0, at);
        System.arraycopy(input, end, out, at, length - end);
        yield out;
      }
      case 6 -> { // a length or count field set to an edge value
        int value = INTERESTING_INTS[random.nextInt(INTERESTING_INTS.length)];
        byte[] field =
            random.nextBoolean()
                ? ByteBuffer.allocate(4).putInt(value).array()
                : ByteBuffer.allocate(2).putShort((short) value).array();
        yield overwrite(input, at, field);
      }
      case 7 ->
          overwrite(
              input, at, new byte[] {STRUCTURAL_BYTES[random.nextInt(STRUCTURAL_BYTES.length)]});
      default -> { // splice two captures
        byte[] other = corpus.get(random.nextInt(corpus.size()));
        int from = other.length == 0 ? 0 : random.nextInt(other.length);
        byte[] out = Arrays.copyOf(input, at + other.length - from);
        System.arraycopy(other, from, out, at, other.length - from);
        yield out;
      }
    };
  }

  private static byte[] randomBytes(Random random, int length) {
    byte[] bytes = new byte[length];
    random.nextBytes(bytes);
    return bytes;
  }

  private static byte[] insert(byte[] input, int at, byte[] inserted) {
    byte[] out = new byte[input.length + inserted.length];
    System.arraycopy(input, 0, out, 0, at);
    System.arraycopy(inserted, 0, out, at, inserted.length);
    System.arraycopy(input, at, out, at + inserted.length, input.length - at);
    return out;
  }

  private static byte[] overwrite(byte[] input, int at, byte[] replacement) {
    byte[] out = Arrays.copyOf(input, Math.max(input.length, at + replacement.length));
    System.arraycopy(replacement, 0, out, at, replacement.length);
    return out;
  }

  /**
   * One capture of each message kind and size from every fixture, plus hand-made messages whose
   * strings and values are the canary.
   */
  private static List<byte[]> corpus() {
    List<byte[]> corpus = new ArrayList<>();
    for (String name : Fixture.ALL) {
      java.util.Set<String> shapes = new java.util.HashSet<>();
      for (Fixture.Line line : Fixture.load(name).lines()) {
        if (shapes.add(line.bytes()[0] + "/" + line.bytes().length)) {
          corpus.add(line.bytes());
        }
      }
    }
    corpus.add(
        Wire.message('I')
            .uint32(7)
            .int8('N')
            .int16(3)
            .textColumn(CANARY)
            .int8('n')
            .int8('b')
            .int32(CANARY_BYTES.length)
            .bytes(CANARY_BYTES)
            .build());
    corpus.add(
        Wire.message('U')
            .uint32(7)
            .int8('O')
            .int16(1)
            .textColumn(CANARY)
            .int8('N')
            .int16(1)
            .textColumn(CANARY + "1.5")
            .build());
    corpus.add(
        Wire.message('R')
            .uint32(7)
            .string(CANARY)
            .string(CANARY)
            .int8('f')
            .int16(1)
            .int8(1)
            .string(CANARY)
            .uint32(23)
            .int32(-1)
            .build());
    corpus.add(
        Wire.message('M')
            .int8(1)
            .int64(1)
            .string(CANARY)
            .int32(CANARY_BYTES.length)
            .bytes(CANARY_BYTES)
            .build());
    corpus.add(Wire.message('b').int64(1).int64(2).int64(3).uint32(4).string(CANARY).build());
    return corpus;
  }

  private static byte[] typeBytes() {
    MessageType[] types = MessageType.values();
    byte[] bytes = new byte[types.length];
    for (int i = 0; i < types.length; i++) {
      bytes[i] = (byte) types[i].typeByte();
    }
    return bytes;
  }
}
