package io.weir.persistence.cdc.assembly;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.pgoutput.PgOutputMessage.Relation;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import java.util.List;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

class SchemaGuardTest {
  private static Relation relation(ReplicaIdentity identity, Relation.Column... columns) {
    return new Relation(OptionalLong.empty(), 42, "public", "orders", identity, List.of(columns));
  }

  private static final Relation.Column ID = new Relation.Column(true, "id", 23, -1);
  private static final Relation.Column NAME = new Relation.Column(false, "name", 25, -1);
  private static final Relation.Column CODE = new Relation.Column(false, "code", 1043, 14);

  @Test
  void firstSightAndRepeatsAreAcceptedSilently() {
    SchemaGuard guard = new SchemaGuard();
    assertThat(guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME))).isEmpty();
    assertThat(guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME))).isEmpty();
    assertThat(guard.schema(42).columnNames()).containsExactly("id", "name");
  }

  @Test
  void anAddedColumnIsAnnounced() {
    SchemaGuard guard = new SchemaGuard();
    guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    assertThat(guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME, CODE)))
        .hasValueSatisfying(s -> assertThat(s.columnNames()).containsExactly("id", "name", "code"));
  }

  @Test
  void aColumnAddedUnderReplicaIdentityFullIsAnnounced() {
    // Under FULL pgoutput flags every column as part of the identity, the added one too.
    Relation.Column idFull = new Relation.Column(true, "id", 23, -1);
    Relation.Column nameFull = new Relation.Column(true, "name", 25, -1);
    Relation.Column codeFull = new Relation.Column(true, "code", 1043, 14);
    SchemaGuard guard = new SchemaGuard();
    guard.accept(relation(ReplicaIdentity.FULL, idFull, nameFull));
    assertThat(guard.accept(relation(ReplicaIdentity.FULL, idFull, nameFull, codeFull)))
        .as("an added column passes under REPLICA IDENTITY FULL too")
        .hasValueSatisfying(s -> assertThat(s.columnNames()).containsExactly("id", "name", "code"));
    SchemaGuard view = new SchemaGuard();
    view.accept(relation(ReplicaIdentity.FULL, idFull, nameFull));
    SchemaGuard.View v = view.view();
    v.accept(relation(ReplicaIdentity.FULL, idFull, nameFull, codeFull));
    view.commit(v);
    assertThat(view.schema(42).columnNames()).containsExactly("id", "name", "code");
  }

  @Test
  void aColumnAddedToTheIdentityOfAKeyedTableHalts() {
    assertHalt(
        relation(ReplicaIdentity.DEFAULT, ID, NAME, new Relation.Column(true, "code", 25, -1)),
        "added column code joined the replica identity");
  }

  @Test
  void incompatibleChangesHaltWithTheTableAndColumnNamed() {
    assertHalt(relation(ReplicaIdentity.DEFAULT, ID), "lost a column");
    assertHalt(
        relation(ReplicaIdentity.DEFAULT, ID, new Relation.Column(false, "label", 25, -1)),
        "column name was dropped or renamed");
    assertHalt(
        relation(ReplicaIdentity.DEFAULT, ID, new Relation.Column(false, "name", 1043, 24)),
        "column name changed type");
    assertHalt(relation(ReplicaIdentity.FULL, ID, NAME), "changed its replica identity");
    assertHalt(
        relation(ReplicaIdentity.DEFAULT, ID, new Relation.Column(true, "name", 25, -1)),
        "replica identity membership");
    assertHalt(
        new Relation(
            OptionalLong.empty(),
            42,
            "public",
            "orders_v2",
            ReplicaIdentity.DEFAULT,
            List.of(ID, NAME)),
        "renamed");
  }

  private static void assertHalt(Relation changed, String expected) {
    SchemaGuard guard = new SchemaGuard();
    guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    assertThatThrownBy(() -> guard.accept(changed))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.SCHEMA_INCOMPATIBLE))
        .hasMessageContaining("public.orders")
        .hasMessageContaining(expected);
  }

  @Test
  void recordedShapesJudgeTheFirstRelationOfARun() {
    SchemaGuard earlier = new SchemaGuard();
    earlier.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    java.util.Map<Long, io.weir.protocol.cdc.TableSchema> recorded =
        java.util.Map.of(42L, earlier.schema(42));
    assertThat(earlier.drainUnrecorded()).as("a first sight is to be recorded").hasSize(1);

    SchemaGuard next = new SchemaGuard(recorded);
    assertThat(next.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME))).isEmpty();
    assertThat(next.drainUnrecorded())
        .as("an unchanged recorded shape needs no new record")
        .isEmpty();
    assertThatThrownBy(
            () -> new SchemaGuard(recorded).accept(relation(ReplicaIdentity.DEFAULT, ID)))
        .as("a column dropped between runs")
        .isInstanceOf(PipelineHaltException.class);
    Relation recreated =
        new Relation(
            OptionalLong.empty(),
            99,
            "public",
            "orders",
            ReplicaIdentity.DEFAULT,
            List.of(ID, NAME));
    assertThatThrownBy(() -> new SchemaGuard(recorded).accept(recreated))
        .hasMessageContaining("dropped and recreated");
  }

  // Streamed transactions: views.

  private static final Relation.Column EXTRA = new Relation.Column(false, "extra", 23, -1);

  @Test
  void aStreamedTransactionsShapesTakeEffectAtItsCommitAndAreRecordedWithIt() {
    SchemaGuard guard = new SchemaGuard();
    guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    guard.drainUnrecorded();
    SchemaGuard.View view = guard.view();
    view.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    view.accept(
        relation(ReplicaIdentity.DEFAULT, ID, NAME, EXTRA)); // ALTER TABLE ADD COLUMN inside it
    assertThat(view.schema(42).columnNames()).containsExactly("id", "name", "extra");
    assertThat(guard.schema(42).columnNames())
        .as("not the run's shape before the commit")
        .containsExactly("id", "name");
    assertThat(view.announced()).extracting(s -> s.columnNames().size()).containsExactly(3);
    guard.commit(view);
    assertThat(guard.schema(42).columnNames()).containsExactly("id", "name", "extra");
    assertThat(guard.drainUnrecorded())
        .extracting(s -> s.columnNames().size())
        .as("the last shape, once")
        .containsExactly(3);
  }

  @Test
  void anAbortedStreamedTransactionLeavesNoShapeBehind() {
    SchemaGuard guard = new SchemaGuard();
    guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    SchemaGuard.View aborted = guard.view();
    aborted.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME, EXTRA));
    // Dropped (Stream Abort): the next ordinary transaction carries the old shape again.
    assertThat(guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME)))
        .as("not a dropped column")
        .isEmpty();
  }

  @Test
  void aViewsShapeDoesNotReplaceOneThatArrivedAfterIt() {
    SchemaGuard guard = new SchemaGuard();
    SchemaGuard.View streamed = guard.view();
    streamed.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    // An ordinary transaction adds a column and commits while the streamed one is open.
    guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME, EXTRA));
    guard.commit(streamed);
    assertThat(guard.schema(42).columnNames())
        .as("the later shape stays")
        .containsExactly("id", "name", "extra");
    assertThat(guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME, EXTRA))).isEmpty();
  }

  @Test
  void anIncompatibleShapeInAStreamHaltsOnlyIfItCommits() {
    SchemaGuard guard = new SchemaGuard();
    guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    SchemaGuard.View dropping = guard.view();
    dropping.accept(
        relation(ReplicaIdentity.DEFAULT, ID)); // ALTER TABLE DROP COLUMN, not yet committed
    assertThat(dropping.schema(42).columnNames())
        .as("its changes are read with its shape")
        .containsExactly("id");
    assertThatThrownBy(() -> guard.commit(dropping))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.SCHEMA_INCOMPATIBLE))
        .hasMessageContaining("lost a column");
    SchemaGuard other = new SchemaGuard();
    other.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    other.view().accept(relation(ReplicaIdentity.DEFAULT, ID)); // then aborted: nothing happens
    assertThat(other.schema(42).columnNames()).containsExactly("id", "name");
  }

  @Test
  void aViewJudgesAgainstRecordedShapesOnFirstSight() {
    SchemaGuard fresh = new SchemaGuard();
    fresh.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    SchemaGuard guard = new SchemaGuard(java.util.Map.of(42L, fresh.schema(42)));
    SchemaGuard.View view = guard.view();
    view.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    assertThat(view.announced()).isEmpty();
    guard.commit(view);
    assertThat(guard.drainUnrecorded()).as("already recorded").isEmpty();
  }
}
