package io.weir.protocol;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class LsnTest {

  @Test
  void formatsLikePgLsn() {
    assertThat(Lsn.of(0L)).hasToString("0/0");
    assertThat(Lsn.of(0x16_B374D848L)).hasToString("16/B374D848");
    assertThat(Lsn.of(-1L)).hasToString("FFFFFFFF/FFFFFFFF");
    assertThat(Lsn.of(0x1_0000_0000L)).hasToString("1/0");
    assertThat(Lsn.of(0xAL)).hasToString("0/A");
    assertThat(Lsn.of(Long.MIN_VALUE)).hasToString("80000000/0");
    assertThat(Lsn.of(0x0000_000F_0000_00F0L)).hasToString("F/F0");
  }

  @Test
  void parsesWhatItPrintsAndWhatPostgresAccepts() {
    assertThat(Lsn.parse("16/B374D848").asLong()).isEqualTo(0x16_B374D848L);
    assertThat(Lsn.parse("16/b374d848")).isEqualTo(Lsn.parse("16/B374D848"));
    assertThat(Lsn.parse("00000016/0B374D84").asLong()).isEqualTo(0x16_0B374D84L);
    assertThat(Lsn.parse("FFFFFFFF/FFFFFFFF").asLong()).isEqualTo(-1L);
    assertThat(Lsn.parse("0/0")).isSameAs(Lsn.INVALID);
  }

  @Test
  void roundTripsRandomPositions() {
    Random random = new Random(42);
    for (int i = 0; i < 10_000; i++) {
      Lsn lsn = Lsn.of(random.nextLong() >>> random.nextInt(64));
      assertThat(Lsn.parse(lsn.toString()))
          .as("parsing the text of %s should give the same position", lsn)
          .isEqualTo(lsn);
    }
  }

  @Test
  void ordersUnsignedAboveTwoToTheSixtyThree() {
    Lsn low = Lsn.of(1L);
    Lsn belowHalf = Lsn.of(Long.MAX_VALUE);
    Lsn half = Lsn.of(Long.MIN_VALUE);
    Lsn top = Lsn.of(-1L);
    List<Lsn> shuffled = new ArrayList<>(List.of(top, Lsn.INVALID, half, low, belowHalf));
    Collections.shuffle(shuffled, new Random(7));
    Collections.sort(shuffled);
    assertThat(shuffled).containsExactly(Lsn.INVALID, low, belowHalf, half, top);
    assertThat(half.isAfter(belowHalf)).as("2^63 should come after 2^63 - 1").isTrue();
    assertThat(belowHalf.isBefore(half)).isTrue();
    assertThat(top.isAfter(top)).as("a position is not after itself").isFalse();
  }

  @Test
  void invalidIsZeroAndOnlyZero() {
    assertThat(Lsn.INVALID.isValid()).isFalse();
    assertThat(Lsn.INVALID.asLong()).isZero();
    assertThat(Lsn.of(1L).isValid()).isTrue();
    assertThat(Lsn.of(0L)).isSameAs(Lsn.INVALID);
  }

  @Test
  void equalityFollowsThePosition() {
    assertThat(Lsn.of(0x16_B374D848L))
        .isEqualTo(Lsn.parse("16/B374D848"))
        .hasSameHashCodeAs(Lsn.parse("16/B374D848"))
        .isNotEqualTo(Lsn.of(0x16_B374D849L));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "",
        "/",
        "16",
        "16/",
        "/B374D848",
        "16/B374D848/1",
        "16//B374D848",
        "123456789/0",
        "0/123456789",
        "G/0",
        "0/-1",
        "-1/0",
        "+1/0",
        " 1/0",
        "1/0 ",
        "0x1/0",
        "1 /0",
        "1/٠",
        "１/0",
        "16/B374D848\n"
      })
  void rejectsMalformedText(String text) {
    assertThatIllegalArgumentException()
        .isThrownBy(() -> Lsn.parse(text))
        .withMessageContaining("hexadecimal");
  }

  @ParameterizedTest
  @ValueSource(strings = {"CAFE/SECRET", "DEADBEEF/DEADBEEF0", "secret-value", "ABC/12Q"})
  void errorMessageStatesTheShapeButNotTheInput(String text) {
    assertThatIllegalArgumentException()
        .isThrownBy(() -> Lsn.parse(text))
        .withMessageNotContaining(text)
        .withMessageNotContaining("SECRET")
        .withMessageNotContaining("DEADBEEF")
        .withMessageNotContaining("12Q");
  }

  @Test
  void rejectsNull() {
    assertThatIllegalArgumentException().isThrownBy(() -> Lsn.parse(null));
  }

  @Test
  void jacksonUsesTheTextForm() throws Exception {
    ObjectMapper mapper = new ObjectMapper();
    Lsn lsn = Lsn.of(0xFFFF_FFFF_0000_0001L);
    String json = mapper.writeValueAsString(lsn);
    assertThat(json).isEqualTo("\"FFFFFFFF/1\"");
    assertThat(mapper.readValue(json, Lsn.class)).isEqualTo(lsn);
  }
}
