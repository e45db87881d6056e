package io.weir.persistence.cdc.mirror;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.sink.SinkException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.sql.BatchUpdateException;
import java.sql.SQLException;
import org.junit.jupiter.api.Test;

class MirrorFailuresTest {

  private static final String CANARY = "canary-4c1e9";

  @Test
  void aRefusalsCodeIsReadBackAndOtherSinkErrorsAreSinkRejected() {
    SinkException refused =
        MirrorFailures.refused(
            "a change to s.t (target m.t)", MirrorFailures.NO_ROW_IDENTITY, "why [not this]: x");
    assertThat(MirrorFailures.code(refused)).isEqualTo("no-row-identity");
    assertThat(
            MirrorFailures.code(
                MirrorFailures.refused("a change to \"s [x]: \".t", "target-missing", "y")))
        .as("a table name that looks like a code does not confuse it")
        .isEqualTo("target-missing");
    assertThat(MirrorFailures.code(SinkException.permanent("mirror refused [x]: y", null)))
        .isEqualTo("sink-rejected");
    assertThat(MirrorFailures.code(SinkException.permanent("other [x]: y", null)))
        .isEqualTo("sink-rejected");
    assertThat(MirrorFailures.code(SinkException.permanent(null, null))).isEqualTo("sink-rejected");
  }

  @Test
  void refusalsOfTheDataArePermanent() {
    for (String state :
        new String[] {"23505", "23502", "23514", "22P02", "22001", "42P01", "42703", "0A000"}) {
      assertThat(MirrorFailures.isPermanent(state))
          .as("SQLState %s refuses the data for good", state)
          .isTrue();
    }
  }

  @Test
  void passingTroubleIsTransient() {
    for (String state :
        new String[] {
          "08006", "08001", "57P01", "57014", "40001", "40P01", "53300", "55P03", "XX000"
        }) {
      assertThat(MirrorFailures.isPermanent(state))
          .as("SQLState %s should be retried", state)
          .isFalse();
    }
    assertThat(MirrorFailures.isPermanent(null))
        .as("a failure without SQLState should be retried")
        .isFalse();
  }

  @Test
  void messageNamesTheStateAndNeverTheDriversText() {
    SQLException driver =
        new SQLException(
            "ERROR: duplicate key value violates unique constraint\n  Detail: Key (email)=("
                + CANARY
                + ")",
            "23505");
    SinkException e = MirrorFailures.fromSql(driver, "a change to public.users (target m.users)");
    assertThat(e.isPermanent()).isTrue();
    assertThat(e.getMessage())
        .isEqualTo(
            "mirror refused a change to public.users (target m.users): SQLState 23505 (unique_violation)");
    assertThat(e.getCause()).isInstanceOf(ScrubbedSqlException.class);
    assertThat(((SQLException) e.getCause()).getSQLState())
        .as("the scrubbed cause should keep the SQLState for SafeErrors")
        .isEqualTo("23505");
    assertThat(SafeErrors.sqlState(e)).isEqualTo("23505");
    assertThat(printed(e))
        .as("a logged stack trace must not carry the row value")
        .doesNotContain(CANARY);
  }

  @Test
  void batchFailuresTakeTheStateOfTheEntryThatFailed() {
    SQLException entry = new SQLException("Detail: Failing row contains (" + CANARY + ")", "23514");
    BatchUpdateException batch =
        new BatchUpdateException("Batch entry 0 was aborted: " + CANARY, null, 0, new int[0]);
    batch.setNextException(entry);
    SinkException e = MirrorFailures.fromSql(batch, "a change to s.t (target m.t)");
    assertThat(e.isPermanent()).as("a check violation inside a batch is still a refusal").isTrue();
    assertThat(e.getMessage()).endsWith("SQLState 23514 (check_violation)");
    assertThat(printed(e)).doesNotContain(CANARY);
  }

  @Test
  void transientFailuresSayTransient() {
    SinkException e =
        MirrorFailures.fromSql(new SQLException("serialization " + CANARY, "40001"), "x");
    assertThat(e.isPermanent()).isFalse();
    assertThat(e.getMessage())
        .isEqualTo("mirror failed transiently on x: SQLState 40001 (serialization_failure)");
  }

  private static String printed(Throwable t) {
    StringWriter out = new StringWriter();
    t.printStackTrace(new PrintWriter(out));
    return out.toString();
  }
}
