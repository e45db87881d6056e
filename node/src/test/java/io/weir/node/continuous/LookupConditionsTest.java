package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * How lookup-rule derivation reads EXPLAIN's condition text: literals, quoting, top-level AND
 * terms.
 */
class LookupConditionsTest {
  @Test
  void stringLiteralsGoAndQuotedIdentifiersStay() {
    assertThat(Registrar.withoutLiterals("((t.x = j.y) AND (j.note = 'a OR b'::text))"))
        .isEqualTo("((t.x = j.y) AND (j.note = ''::text))");
    assertThat(Registrar.withoutLiterals("(t.\"a'\" = 'it''s'::text)"))
        .isEqualTo("(t.\"a'\" = ''::text)");
    assertThat(Registrar.withoutLiterals("(t.x = 'open")).isNull();
  }

  @Test
  void onlyTopLevelAndTermsCount() {
    assertThat(Registrar.conjuncts("((t.x = j.y) AND (t.z > 0))"))
        .containsExactly("t.x = j.y", "t.z > 0");
    assertThat(Registrar.conjuncts("(t.x = j.y)")).containsExactly("t.x = j.y");
    assertThat(Registrar.conjuncts("((t.x = j.y) IS NOT TRUE)"))
        .containsExactly("(t.x = j.y) IS NOT TRUE");
    assertThat(Registrar.conjuncts("(COALESCE((t.x = j.y), true))"))
        .containsExactly("COALESCE((t.x = j.y), true)");
    assertThat(Registrar.conjuncts("((t.x = j.y) OR (j.z > 0))")).isNull();
    assertThat(Registrar.conjuncts("(((t.x = j.y) AND (t.z > 0)) OR (j.w > 0))")).isNull();
    assertThat(Registrar.conjuncts("((t.\" AND \" = j.y) AND (t.z > 0))"))
        .containsExactly("t.\" AND \" = j.y", "t.z > 0");
    assertThat(Registrar.conjuncts("((t.x = j.y)")).isNull();
  }
}
