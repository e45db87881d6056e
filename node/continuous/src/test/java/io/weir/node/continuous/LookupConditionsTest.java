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
    assertThat(ImpactPlan.withoutLiterals("((t.x = j.y) AND (j.note = 'a OR b'::text))"))
        .isEqualTo("((t.x = j.y) AND (j.note = ''::text))");
    assertThat(ImpactPlan.withoutLiterals("(t.\"a'\" = 'it''s'::text)"))
        .isEqualTo("(t.\"a'\" = ''::text)");
    assertThat(ImpactPlan.withoutLiterals("(t.x = 'open")).isNull();
  }

  @Test
  void onlyTopLevelAndTermsCount() {
    assertThat(ImpactPlan.conjuncts("((t.x = j.y) AND (t.z > 0))"))
        .containsExactly("t.x = j.y", "t.z > 0");
    assertThat(ImpactPlan.conjuncts("(t.x = j.y)")).containsExactly("t.x = j.y");
    assertThat(ImpactPlan.conjuncts("((t.x = j.y) IS NOT TRUE)"))
        .containsExactly("(t.x = j.y) IS NOT TRUE");
    assertThat(ImpactPlan.conjuncts("(COALESCE((t.x = j.y), true))"))
        .containsExactly("COALESCE((t.x = j.y), true)");
    assertThat(ImpactPlan.conjuncts("((t.x = j.y) OR (j.z > 0))")).isNull();
    assertThat(ImpactPlan.conjuncts("(((t.x = j.y) AND (t.z > 0)) OR (j.w > 0))")).isNull();
    assertThat(ImpactPlan.conjuncts("((t.\" AND \" = j.y) AND (t.z > 0))"))
        .containsExactly("t.\" AND \" = j.y", "t.z > 0");
    assertThat(ImpactPlan.conjuncts("((t.x = j.y)")).isNull();
  }
}
