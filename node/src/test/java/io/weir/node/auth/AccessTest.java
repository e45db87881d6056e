package io.weir.node.auth;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class AccessTest {
  private static final CollectionPolicy ACL =
      new CollectionPolicy("c", 1, List.of("ssn"), Visibility.ACL, "acl");
  private static final CollectionPolicy OWNER =
      new CollectionPolicy("c", 1, List.of(), Visibility.OWNER, "owner");
  private static final Principal ANN =
      new Principal(
          "ann", false, Map.of("c", Set.of("FieldRead:ssn", "FieldUse:*")), 1, Set.of("team"));
  private static final Principal BOB =
      new Principal("bob", false, Map.of("c", Set.of("FieldUse:ssn")), 1, Set.of());
  private static final Principal ADMIN = new Principal("root", true);

  private static JsonNode json(String text) throws Exception {
    return Access.JSON.readTree(text);
  }

  @Test
  void aclRowsAreVisibleToListedPrincipalsAndGroupsOnly() throws Exception {
    assertThat(Access.visibleRow(ANN, ACL, json("{\"acl\":[\"ann\"]}"))).isTrue();
    assertThat(Access.visibleRow(ANN, ACL, json("{\"acl\":[\"group:team\"]}"))).isTrue();
    assertThat(Access.visibleRow(BOB, ACL, json("{\"acl\":[\"group:team\",\"annie\"]}"))).isFalse();
    assertThat(Access.visibleRow(ANN, ACL, json("{\"acl\":\"ann\"}")))
        .as("not a list: nobody")
        .isFalse();
    assertThat(Access.visibleRow(ANN, ACL, json("{\"x\":1}"))).as("no ACL: nobody").isFalse();
    assertThat(Access.visibleRow(ADMIN, ACL, json("{\"x\":1}"))).isTrue();
    assertThat(Access.visibleAcl(ANN, ACL, "[\"ann\"]")).isTrue();
    assertThat(Access.visibleAcl(ANN, ACL, null)).as("unknown ACL: nobody").isFalse();
    assertThat(Access.visibleAcl(ANN, ACL, "not json")).isFalse();
  }

  @Test
  void ownerRowsAreVisibleToTheirOwnerOnly() throws Exception {
    assertThat(Access.visibleRow(ANN, OWNER, json("{\"owner\":\"ann\"}"))).isTrue();
    assertThat(Access.visibleRow(BOB, OWNER, json("{\"owner\":\"ann\"}"))).isFalse();
    assertThat(Access.visibleRow(ANN, OWNER, json("{\"owner\":[\"ann\"]}"))).isFalse();
    assertThat(Access.visibleRow(BOB, CollectionPolicy.none("c"), json("{}"))).isTrue();
  }

  @Test
  void sensitiveFieldsNeedFieldReadToBeShownAndFieldUseToBeQueried() throws Exception {
    ObjectNode row =
        (ObjectNode) json("{\"acl\":[\"ann\",\"bob\"],\"ssn\":\"123\",\"name\":\"x\"}");
    assertThat(Access.project(ANN, ACL, row).has("ssn")).isTrue();
    assertThat(Access.project(BOB, ACL, row).has("ssn")).isFalse();
    assertThat(row.has("ssn")).as("the input is not changed").isTrue();
    assertThat(Access.mayUse(BOB, ACL, "ssn")).isTrue();
    assertThat(Access.mayUse(BOB, ACL, "name"))
        .as("FieldUse:ssn does not cover other fields")
        .isFalse();
    assertThat(Access.mayUse(ANN, ACL, "name.first")).isTrue();
    assertThat(Access.mayUse(ANN, ACL, "ssn")).as("* does not cover sensitive fields").isFalse();
    assertThat(Access.unrestricted(ACL)).isFalse();
    assertThat(Access.unrestricted(CollectionPolicy.none("c"))).isTrue();
  }
}
