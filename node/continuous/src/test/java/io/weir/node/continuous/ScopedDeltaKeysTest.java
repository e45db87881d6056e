package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * How the scoped delta collects a transaction's affected keys, and when it gives up for a full read
 * instead (each reason named): a change whose table no longer has the columns the session's impact
 * rule reads ({@code unknown-schema}), one without the old key it needs ({@code incomplete-tuple}),
 * and more keys than the budget ({@code budget-exceeded}).
 */
class ScopedDeltaKeysTest {
  private static final long INT4 = 23;
  private static final String TABLE = "public.t";

  /** The impact rule of {@code SELECT id, score FROM t ORDER BY score}: keys are t's ids. */
  private static final Definition.Impact IMPACT =
      new Definition.Impact(TABLE, List.of("id"), List.of("integer"));

  private static TableSchema table(ReplicaIdentity identity, TableSchema.Column... columns) {
    return new TableSchema(16_400, "public", "t", identity, List.of(columns));
  }

  private static TableSchema.Column column(String name, boolean key) {
    return new TableSchema.Column(name, INT4, -1, key);
  }

  private static ScopedDelta.Keys keys(int bound) {
    return new ScopedDelta.Keys(IMPACT, Set.of(TABLE), bound);
  }

  @Test
  void keysOfInsertsUpdatesAndDeletesAreCollected() {
    TableSchema t = table(ReplicaIdentity.DEFAULT, column("id", true), column("score", false));
    ScopedDelta.Keys k = keys(10);
    k.change(new Change.Insert(t, TupleData.ofText("1", "10")), t);
    k.change(new Change.Update(t, OldTupleKind.NONE, null, TupleData.ofText("2", "20")), t);
    k.change(
        new Change.Update(
            t, OldTupleKind.KEY, TupleData.ofText("3", null), TupleData.ofText("4", "40")),
        t);
    k.change(new Change.Delete(t, OldTupleKind.KEY, TupleData.ofText("5", null)), t);
    assertThat(k.fallback).isNull();
    assertThat(k.keys.values())
        .containsExactly(List.of("1"), List.of("2"), List.of("4"), List.of("3"), List.of("5"));
  }

  @Test
  void aTableWithoutTheImpactColumnIsAnUnknownSchema() {
    // The id column was dropped or renamed since the session was planned: its keys cannot be known.
    TableSchema renamed =
        table(ReplicaIdentity.DEFAULT, column("ident", true), column("score", false));
    ScopedDelta.Keys k = keys(10);
    k.change(new Change.Insert(renamed, TupleData.ofText("1", "10")), renamed);
    assertThat(k.fallback).isEqualTo(FallbackReason.UNKNOWN_SCHEMA);
    assertThat(k.keys).isEmpty();
  }

  @Test
  void aRowShorterThanItsSchemaIsAnUnknownSchema() {
    // The relation message names a column the row does not carry.
    TableSchema t = table(ReplicaIdentity.DEFAULT, column("score", false), column("id", true));
    ScopedDelta.Keys k = keys(10);
    k.change(new Change.Insert(t, TupleData.ofText("10")), t);
    assertThat(k.fallback).isEqualTo(FallbackReason.UNKNOWN_SCHEMA);
  }

  @Test
  void aKeyChangeWithoutItsOldValueIsAnIncompleteTuple() {
    // Replica identity on another column (an index on score): an update that moves the id does not
    // say which id the row had.
    TableSchema t = table(ReplicaIdentity.INDEX, column("id", false), column("score", true));
    ScopedDelta.Keys k = keys(10);
    k.change(new Change.Update(t, OldTupleKind.NONE, null, TupleData.ofText("2", "20")), t);
    assertThat(k.fallback).isEqualTo(FallbackReason.INCOMPLETE_TUPLE);
  }

  @Test
  void moreKeysThanTheBudgetFallBack() {
    TableSchema t = table(ReplicaIdentity.DEFAULT, column("id", true), column("score", false));
    ScopedDelta.Keys k = keys(2);
    for (int id = 1; id <= 3; id++) {
      k.change(new Change.Insert(t, TupleData.ofText(Integer.toString(id), "1")), t);
    }
    assertThat(k.fallback).isEqualTo(FallbackReason.BUDGET_EXCEEDED);
  }

  @Test
  void changesOfTablesTheSessionDoesNotReadAreIgnored() {
    TableSchema other =
        new TableSchema(
            16_401, "public", "other", ReplicaIdentity.DEFAULT, List.of(column("ident", true)));
    ScopedDelta.Keys k = keys(10);
    k.change(new Change.Insert(other, TupleData.ofText("1")), other);
    assertThat(k.fallback).isNull();
    assertThat(k.keys).isEmpty();
  }
}
