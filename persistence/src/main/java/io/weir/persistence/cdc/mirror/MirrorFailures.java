package io.weir.persistence.cdc.mirror;

import io.weir.persistence.cdc.sink.SinkException;
import java.sql.SQLException;
import java.util.Map;

/**
 * Turns database failures into value-free {@link SinkException}s, permanent or transient by
 * SQLState. Messages carry the table, the SQLState and its condition name; causes are scrubbed
 * ({@link ScrubbedSqlException}), never the driver's exception.
 */
final class MirrorFailures {
  private MirrorFailures() {}

  /** Condition names of the SQLStates a mirror is likely to meet, for readable messages. */
  private static final Map<String, String> NAMES =
      Map.ofEntries(
          Map.entry("08000", "connection_exception"),
          Map.entry("08001", "sqlclient_unable_to_establish_sqlconnection"),
          Map.entry("08003", "connection_does_not_exist"),
          Map.entry("08006", "connection_failure"),
          Map.entry("0A000", "feature_not_supported"),
          Map.entry("21000", "cardinality_violation"),
          Map.entry("22001", "string_data_right_truncation"),
          Map.entry("22003", "numeric_value_out_of_range"),
          Map.entry("22007", "invalid_datetime_format"),
          Map.entry("22008", "datetime_field_overflow"),
          Map.entry("22P02", "invalid_text_representation"),
          Map.entry("23502", "not_null_violation"),
          Map.entry("23503", "foreign_key_violation"),
          Map.entry("23505", "unique_violation"),
          Map.entry("23514", "check_violation"),
          Map.entry("23P01", "exclusion_violation"),
          Map.entry("25P02", "in_failed_sql_transaction"),
          Map.entry("3F000", "invalid_schema_name"),
          Map.entry("40001", "serialization_failure"),
          Map.entry("40P01", "deadlock_detected"),
          Map.entry("42501", "insufficient_privilege"),
          Map.entry("42601", "syntax_error"),
          Map.entry("42703", "undefined_column"),
          Map.entry("42804", "datatype_mismatch"),
          Map.entry("42P01", "undefined_table"),
          Map.entry("428C9", "generated_always"),
          Map.entry("53100", "disk_full"),
          Map.entry("53200", "out_of_memory"),
          Map.entry("53300", "too_many_connections"),
          Map.entry("55P03", "lock_not_available"),
          Map.entry("57014", "query_canceled"),
          Map.entry("57P01", "admin_shutdown"),
          Map.entry("57P02", "crash_shutdown"),
          Map.entry("57P03", "cannot_connect_now"));

  /**
   * Whether a failure with this SQLState refuses the data for good. Integrity (23), data (22),
   * syntax/undefined object/privilege (42), unsupported feature (0A), cardinality (21), WITH CHECK
   * OPTION (44) and invalid schema (3F) are permanent: retrying the same change cannot succeed
   * until someone changes the target. Everything else, notably connection (08), operator
   * intervention (57), serialization and deadlock (40001, 40P01), insufficient resources (53) and
   * unknown or missing SQLStates, is transient: the pipeline retries with backoff.
   */
  static boolean isPermanent(String sqlState) {
    if (sqlState == null || sqlState.length() != 5) {
      return false;
    }
    return switch (sqlState.substring(0, 2)) {
      case "21", "22", "23", "42", "0A", "44", "3F" -> true;
      default -> false;
    };
  }

  /**
   * The SQLState of {@code e}, else of the first exception along its next/cause chains that has
   * one.
   */
  static String sqlState(SQLException e) {
    int guard = 0;
    for (SQLException s = e; s != null && guard++ < 8; s = s.getNextException()) {
      if (s.getSQLState() != null) {
        return s.getSQLState();
      }
    }
    guard = 0;
    for (Throwable t = e.getCause(); t != null && guard++ < 8; t = t.getCause()) {
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        return sql.getSQLState();
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return null;
  }

  /** {@code SQLState 23505 (unique_violation)}, or without a name when none is known. */
  static String describeState(String sqlState) {
    if (sqlState == null) {
      return "no SQLState";
    }
    String name = NAMES.get(sqlState);
    return "SQLState " + sqlState + (name == null ? "" : " (" + name + ")");
  }

  /**
   * A failure while working on {@code what} (a phrase naming tables, never values, such as {@code
   * "a change to public.orders (target mirror.orders)"}).
   */
  static SinkException fromSql(SQLException e, String what) {
    String state = sqlState(e);
    ScrubbedSqlException cause = ScrubbedSqlException.of(e);
    if (isPermanent(state)) {
      return SinkException.permanent("mirror refused " + what + ": " + describeState(state), cause);
    }
    return SinkException.transientFailure(
        "mirror failed transiently on " + what + ": " + describeState(state), cause);
  }

  // Typed reasons of the mirror's own refusals: the code in brackets in the halt detail (see
  // docs/cdc.md, "Mirror refusals"); each message says what the operator can do.

  /** The target table does not exist. */
  static final String TARGET_MISSING = "target-missing";

  /** The target is a view, foreign table or other relation. */
  static final String NOT_A_TABLE = "target-not-a-table";

  /** A source column is not a column of the target. */
  static final String COLUMN_MISSING = "target-column-missing";

  /** A source column is a generated column of the target, which nothing may write. */
  static final String GENERATED_COLUMN = "target-column-generated";

  /** A key column of the target is not a column of the source. */
  static final String KEY_NOT_IN_SOURCE = "key-not-in-source";

  /**
   * An update or delete on a target keyed by columns outside the source's replica identity: the
   * change does not say which target row it is about.
   */
  static final String KEY_NOT_IDENTITY = "key-not-replica-identity";

  /**
   * An update or delete on a target without a key whose source is not REPLICA IDENTITY FULL: the
   * change carries no old row to find the target row by.
   */
  static final String NO_ROW_IDENTITY = "no-row-identity";

  /** A keyless target's column has no equality, so rows cannot be found by their old image. */
  static final String NO_EQUALITY = "no-equality";

  /** A row image lacks a value the statement needs (a key column, or a column of an old image). */
  static final String MISSING_VALUE = "missing-value";

  /** A row image does not fit the table (column count, binary format). */
  static final String MALFORMED_ROW = "malformed-row";

  /** The checkpoint row cannot be used. */
  static final String CHECKPOINT = "checkpoint";

  /**
   * A refusal the mirror decided itself (no database error behind it): {@code mirror refused <what>
   * [<code>]: <why>}. {@code why} names columns at most, never values, and says what to do.
   */
  static SinkException refused(String what, String code, String why) {
    return SinkException.refused(code, "mirror refused " + what + " [" + code + "]: " + why);
  }

  /** The code of a {@link #refused} exception, or {@code sink-rejected} for any other. */
  static String code(SinkException e) {
    return e.code() != null ? e.code() : "sink-rejected";
  }
}
