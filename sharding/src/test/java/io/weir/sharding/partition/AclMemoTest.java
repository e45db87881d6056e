package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
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

  /**
   * What a read of the documents table found is remembered only for the entries still at the
   * journal sequence read, under the rule version and in the incarnation it was read in.
   */
  @Test
  void valuesReadFromTheTableAreRememberedOnlyForTheVersionsTheyWereReadFor() {
    PartitionState s = PartitionState.empty();
    s.incarnation = "inc-1";
    s.rules.put("notes", new Partition.RowRule("acl", 2));
    s.index.put("notes", "a", new DocumentIndex.Entry(1, 10, 20));
    s.index.put("notes", "b", new DocumentIndex.Entry(2, 11, 20));
    PartitionReads reads = new PartitionReads(0, new InMemoryDocumentTable(), () -> {});
    reads.learned(
        s,
        new Partition.AclsRead(
            "inc-1",
            "notes",
            2,
            List.of(
                new Partition.AclRead("a", 10, "[\"x\"]"),
                new Partition.AclRead("b", 9, "[\"y\"]"),
                new Partition.AclRead("c", 12, "[\"z\"]"))));
    assertThat(s.index.get("notes", "a").acl(2)).isEqualTo("[\"x\"]");
    assertThat(s.index.get("notes", "b").acl(2)).as("read at an older sequence").isNull();
    assertThat(s.index.get("notes", "c")).as("no entry is made").isNull();
    List<Partition.AclRead> b = List.of(new Partition.AclRead("b", 11, "[\"y\"]"));
    reads.learned(s, new Partition.AclsRead("inc-1", "notes", 1, b));
    assertThat(s.index.get("notes", "b").acl(2)).as("read under another rule").isNull();
    reads.learned(s, new Partition.AclsRead("inc-0", "notes", 2, b));
    assertThat(s.index.get("notes", "b").acl(2)).as("read in another incarnation").isNull();
    reads.learned(s, new Partition.AclsRead("inc-1", "notes", 2, b));
    assertThat(s.index.get("notes", "b").acl(2)).isEqualTo("[\"y\"]");
    assertThat(s.index.get("notes", "b"))
        .as("a remembered value is not state")
        .isEqualTo(new DocumentIndex.Entry(2, 11, 20))
        .hasSameHashCodeAs(new DocumentIndex.Entry(2, 11, 20));
    s.rules.put("notes", new Partition.RowRule(null, 3));
    s.index.put("notes", "a", new DocumentIndex.Entry(1, 10, 20));
    reads.learned(
        s,
        new Partition.AclsRead(
            "inc-1", "notes", 3, List.of(new Partition.AclRead("a", 10, "[\"x\"]"))));
    assertThat(s.index.get("notes", "a").acl(3)).as("no rule: nothing to remember").isNull();
  }

  @Test
  void anAclsTextNamesNoValue() {
    assertThat(new AclMemo.Acl(1, "[\"s3cr3t\"]").toString()).doesNotContain("s3cr3t");
    assertThat(new Partition.AclRead("id-1", 5, "[\"s3cr3t\"]").toString())
        .doesNotContain("s3cr3t")
        .doesNotContain("id-1");
  }
}
