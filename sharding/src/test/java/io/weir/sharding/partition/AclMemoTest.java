package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The bounds of what a partition remembers of its documents' row-visibility values (ADR 0059). */
class AclMemoTest {
  @Test
  void documentsWithOneValueShareOneAclUnderItsRuleVersion() {
    AclMemo memo = new AclMemo();
    AclMemo.Acl a = memo.of("notes", 3, "[\"ann\"]");
    assertThat(a).isEqualTo(new AclMemo.Acl(3, "[\"ann\"]"));
    assertThat(memo.of("notes", 3, "[\"ann\"]")).isSameAs(a);
    assertThat(memo.of("orders", 3, "[\"ann\"]")).isNotSameAs(a);
    DocumentIndex.Entry e = new DocumentIndex.Entry(1, 10, 20).withAcl(a);
    assertThat(e.acl(3)).isEqualTo("[\"ann\"]");
    assertThat(e.acl(4)).as("read under another rule: unknown").isNull();
    assertThat(new DocumentIndex.Entry(1, 10, 20).acl(3)).isNull();
  }

  @Test
  void anotherRuleVersionStartsTheCollectionsValuesOver() {
    AclMemo memo = new AclMemo();
    memo.of("notes", 1, "\"a\"");
    memo.of("notes", 1, "\"b\"");
    assertThat(memo.values("notes")).isEqualTo(2);
    assertThat(memo.of("notes", 2, "\"a\"").ruleVersion()).isEqualTo(2);
    assertThat(memo.values("notes")).isEqualTo(1);
  }

  @Test
  void longValuesAndValuesPastTheCollectionsBoundAreNotRemembered() {
    AclMemo memo = new AclMemo();
    assertThat(memo.of("notes", 1, null)).isNull();
    assertThat(memo.of("notes", 1, "x".repeat(AclMemo.MAX_CHARS))).isNotNull();
    assertThat(memo.of("notes", 1, "x".repeat(AclMemo.MAX_CHARS + 1))).isNull();
    for (int i = memo.values("notes"); i < AclMemo.MAX_VALUES; i++) {
      assertThat(memo.of("notes", 1, "\"u" + i + "\"")).isNotNull();
    }
    assertThat(memo.values("notes")).isEqualTo(AclMemo.MAX_VALUES);
    assertThat(memo.of("notes", 1, "\"one more\"")).isNull();
    assertThat(memo.of("notes", 1, "\"u5\"")).as("a value already kept").isNotNull();
    assertThat(memo.values("notes")).isEqualTo(AclMemo.MAX_VALUES);
    assertThat(memo.of("other", 1, "\"one more\"")).as("bounds are per collection").isNotNull();
  }

  @Test
  void anAclsTextNamesNoValue() {
    assertThat(new AclMemo.Acl(1, "[\"s3cr3t\"]").toString()).doesNotContain("s3cr3t");
    assertThat(new Partition.AclRead("id-1", 5, "[\"s3cr3t\"]").toString())
        .doesNotContain("s3cr3t")
        .doesNotContain("id-1");
  }
}
