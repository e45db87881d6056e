package io.weir.persistence;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.StorageCopies.Quorum;
import org.junit.jupiter.api.Test;

/** synchronous_standby_names as PostgreSQL reads it, and the copies a commit is durable on. */
class StorageCopiesTest {

  @Test
  void everyFormOfSynchronousStandbyNames() {
    assertThat(StorageCopies.parse("")).isEqualTo(new Quorum("none", 0));
    assertThat(StorageCopies.parse(null)).isEqualTo(new Quorum("none", 0));
    assertThat(StorageCopies.parse("ANY 1 (s1, s2)")).isEqualTo(new Quorum("any", 1));
    assertThat(StorageCopies.parse("any 2 (\"a b\", c, d)")).isEqualTo(new Quorum("any", 2));
    assertThat(StorageCopies.parse("FIRST 2 (s1, s2, s3)")).isEqualTo(new Quorum("first", 2));
    assertThat(StorageCopies.parse("2 (s1, s2)"))
        .as("N (list) is FIRST")
        .isEqualTo(new Quorum("first", 2));
    assertThat(StorageCopies.parse("s1, s2"))
        .as("a bare list waits for the first")
        .isEqualTo(new Quorum("first", 1));
    assertThat(StorageCopies.parse("*")).isEqualTo(new Quorum("first", 1));
    assertThat(StorageCopies.parse(" ANY 1 ( s1 ) ")).isEqualTo(new Quorum("any", 1));
  }

  @Test
  void copiesCountOnlyWhatACommitWaitsFor() {
    StorageCopies rf3 = StorageCopies.of("ANY 1 (s1, s2)", "on", true, 2);
    assertThat(rf3.copies()).isEqualTo(2);
    assertThat(rf3.known()).isTrue();
    assertThat(rf3.detail()).contains("ANY 1").contains("2 streaming");
    assertThat(StorageCopies.of("FIRST 2 (s1, s2)", "remote_apply", true, 2).copies()).isEqualTo(3);
    assertThat(StorageCopies.of("", "on", true, 0).copies()).as("a single PostgreSQL").isEqualTo(1);
    StorageCopies local = StorageCopies.of("ANY 1 (s1, s2)", "local", true, 2);
    assertThat(local.copies()).as("local does not wait for a standby").isEqualTo(1);
    assertThat(local.detail()).contains("synchronous_commit is local");
    assertThat(StorageCopies.of("ANY 1 (s1, s2)", "remote_write", true, 2).copies())
        .as("remote_write: received, not flushed")
        .isEqualTo(1);
    assertThat(StorageCopies.of("ANY 1 (s1, s2)", "off", true, 2).copies()).isEqualTo(1);
    StorageCopies short1 = StorageCopies.of("FIRST 2 (s1, s2)", "on", true, 1);
    assertThat(short1.copies()).as("fewer streaming than the quorum: commits wait").isEqualTo(1);
    assertThat(short1.detail()).contains("1 streaming").contains("commits wait");
    StorageCopies blind = StorageCopies.of("ANY 1 (s1, s2)", "on", false, 0);
    assertThat(blind.known()).isFalse();
    assertThat(blind.detail()).contains("pg_monitor");
  }
}
