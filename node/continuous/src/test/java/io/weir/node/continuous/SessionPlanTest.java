package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** What a session does with its query planned again (at start and after a catalog change). */
class SessionPlanTest {
  private static final Definition.Lookup BY_AUTHOR =
      new Definition.Lookup("public.authors", "id", "author_id", "integer");
  private static final Definition.Lookup BY_TAG =
      new Definition.Lookup("public.tags", "post_id", "id", "integer");
  private static final Definition.Impact RULES =
      new Definition.Impact(
          "public.posts", List.of("id"), List.of("integer"), List.of(BY_AUTHOR, BY_TAG));
  private static final List<String> TABLES =
      List.of("public.authors", "public.posts", "public.tags");

  private static Session session() {
    return TestSessions.session(
        "cq_1",
        "scope",
        TestSessions.definition(
            "likes", 5, List.of("id", "likes"), TABLES, List.of("int4", "int4"), RULES),
        10);
  }

  @Test
  void theSamePlanKeepsTheRules() {
    Session s = session();
    assertThat(s.planned(new Registrar.Replanned(TABLES, RULES))).isFalse();
    assertThat(s.fullOnly).isNull();
    assertThat(s.impact).isEqualTo(RULES);
    assertThat(s.tables).isEqualTo(Set.copyOf(TABLES));
  }

  @Test
  void aLookupThePlanNoLongerShowsIsDroppedAndANewOneIsNotTakenUp() {
    Session s = session();
    Definition.Lookup other = new Definition.Lookup("public.tags", "id", "id", "integer");
    assertThat(
            s.planned(
                new Registrar.Replanned(
                    TABLES,
                    new Definition.Impact(
                        "public.posts",
                        List.of("id"),
                        List.of("integer"),
                        List.of(BY_AUTHOR, other)))))
        .isTrue();
    assertThat(s.fullOnly).isNull();
    assertThat(s.impact.lookups()).containsExactly(BY_AUTHOR);
  }

  @Test
  void anotherTableSetOrKeyRuleMeansFullReadsOverTheNewSet() {
    Session s = session();
    List<String> more = List.of("public.authors", "public.members", "public.posts", "public.tags");
    assertThat(s.planned(new Registrar.Replanned(more, RULES))).isTrue();
    assertThat(s.fullOnly).isEqualTo("plan-changed");
    assertThat(s.tables).containsExactlyInAnyOrderElementsOf(more);
    assertThat(s.impact).isNull();

    Session t = session();
    assertThat(t.planned(new Registrar.Replanned(TABLES, null))).isTrue();
    assertThat(t.fullOnly).isEqualTo("plan-changed");

    Session u = session();
    assertThat(u.planned(new Registrar.Replanned(null, null)))
        .as("a table set no longer known")
        .isTrue();
    assertThat(u.tables).isNull();
  }

  @Test
  void aFailedPlanReadsEverythingUntilAPlanSucceeds() {
    Session s = session();
    s.replanFailed();
    assertThat(s.fullOnly).isEqualTo("replan-pending");
    assertThat(s.tables).as("every transaction counts").isNull();
    assertThat(s.planned(new Registrar.Replanned(TABLES, RULES))).isFalse();
    assertThat(s.fullOnly).isNull();
    assertThat(s.impact).isEqualTo(RULES);
  }
}
