package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
  void incompatibleChangesHaltWithTheTableAndColumnNamed() {
    assertHalt(relation(ReplicaIdentity.DEFAULT, ID), "lost a column");
    assertHalt(relation(ReplicaIdentity.DEFAULT, ID, new Relation.Column(false, "label", 25, -1)), "column name was dropped or renamed");
    assertHalt(relation(ReplicaIdentity.DEFAULT, ID, new Relation.Column(false, "name", 1043, 24)), "column name changed type");
    assertHalt(relation(ReplicaIdentity.FULL, ID, NAME), "changed its replica identity");
    assertHalt(relation(ReplicaIdentity.DEFAULT, ID, new Relation.Column(true, "name", 25, -1)), "replica identity membership");
    assertHalt(new Relation(OptionalLong.empty(), 42, "public", "orders_v2", ReplicaIdentity.DEFAULT, List.of(ID, NAME)), "renamed");
  }

  private static void assertHalt(Relation changed, String expected) {
    SchemaGuard guard = new SchemaGuard();
    guard.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    assertThatThrownBy(() -> guard.accept(changed))
        .isInstanceOfSatisfying(PipelineHaltException.class, e -> assertThat(e.reason()).isEqualTo(HaltReason.SCHEMA_INCOMPATIBLE))
        .hasMessageContaining("public.orders")
        .hasMessageContaining(expected);
  }

  @Test
  void recordedShapesJudgeTheFirstRelationOfARun() {
    SchemaGuard earlier = new SchemaGuard();
    earlier.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME));
    java.util.Map<Long, io.weir.protocol.cdc.TableSchema> recorded = java.util.Map.of(42L, earlier.schema(42));
    assertThat(earlier.drainUnrecorded()).as("a first sight is to be recorded").hasSize(1);

    SchemaGuard next = new SchemaGuard(recorded);
    assertThat(next.accept(relation(ReplicaIdentity.DEFAULT, ID, NAME))).isEmpty();
    assertThat(next.drainUnrecorded()).as("an unchanged recorded shape needs no new record").isEmpty();
    assertThatThrownBy(() -> new SchemaGuard(recorded).accept(relation(ReplicaIdentity.DEFAULT, ID)))
        .as("a column dropped between runs").isInstanceOf(PipelineHaltException.class);
    Relation recreated = new Relation(OptionalLong.empty(), 99, "public", "orders", ReplicaIdentity.DEFAULT, List.of(ID, NAME));
    assertThatThrownBy(() -> new SchemaGuard(recorded).accept(recreated))
        .hasMessageContaining("dropped and recreated");
  }
}
