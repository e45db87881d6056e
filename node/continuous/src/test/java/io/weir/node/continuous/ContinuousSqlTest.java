package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.protocol.ErrorCode;
import java.util.List;
import org.junit.jupiter.api.Test;

class ContinuousSqlTest {

  private static void refused(String sql, ErrorCode code) {
    assertThatThrownBy(() -> ContinuousSql.parse(sql))
        .as("the query should be refused with " + code)
        .isInstanceOfSatisfying(
            ContinuousQueryException.class,
            e -> {
              assertThat(e.code()).isEqualTo(code);
              assertThat(e.getMessage())
                  .as("the message should not quote the query")
                  .doesNotContain("secret");
            });
  }

  @Test
  void namedParametersBecomePlaceholdersAndCastsStay() {
    ContinuousSql.Parsed p =
        ContinuousSql.parse(
            "SELECT id, score::int FROM t WHERE owner = :owner AND score > :min::int AND note <> ':not_a_param' "
                + "AND owner <> :owner -- :comment\n");
    assertThat(p.jdbcSql())
        .contains("owner = ?")
        .contains("> ?::int")
        .contains("':not_a_param'")
        .contains("score::int");
    assertThat(p.parameterOrder()).containsExactly("owner", "min", "owner");
    assertThat(p.normalized()).doesNotContain("comment");
  }

  @Test
  void questionMarkOperatorIsEscapedForPgjdbc() {
    assertThat(ContinuousSql.parse("SELECT id FROM t WHERE doc ? 'k'").jdbcSql())
        .contains("doc ?? 'k'");
  }

  @Test
  void recursiveCteWithCycleSetIsAccepted() {
    ContinuousSql.Parsed p =
        ContinuousSql.parse(
            "WITH RECURSIVE hop(node, depth) AS (SELECT :start::int, 0 UNION ALL SELECT e.dst, h.depth + 1 FROM edges e "
                + "JOIN hop h ON e.src = h.node WHERE h.depth < :k) CYCLE node SET is_cycle USING path "
                + "SELECT node, min(depth) AS depth FROM hop GROUP BY node");
    assertThat(p.parameterNames()).containsExactly("start", "k");
  }

  @Test
  void allowListRefusals() {
    refused("SELECT * FROM t LIMIT 5", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT * FROM t OFFSET 5", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT * FROM t FETCH FIRST 5 ROWS ONLY", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT id, row_number() OVER (ORDER BY id) FROM t", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT 1; SELECT 'secret'", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SET role postgres", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT set_config('role', 'secret', false)", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT pg_terminate_backend(1)", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT PG_SLEEP (1)", ErrorCode.QUERY_NOT_ALLOWED);
    refused("WITH x AS (DELETE FROM t RETURNING id) SELECT * FROM x", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT * INTO t2 FROM t", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT * FROM t FOR SHARE", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT * FROM t WHERE id = $1", ErrorCode.QUERY_NOT_ALLOWED);
    refused("  ", ErrorCode.QUERY_NOT_ALLOWED);
    refused("(SELECT 1)", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT 'secret", ErrorCode.INVALID_QUERY);
    refused("SELECT /* secret", ErrorCode.INVALID_QUERY);
  }

  @Test
  void wordsInsideLiteralsAndQuotedNamesAreNotKeywords() {
    ContinuousSql.Parsed p =
        ContinuousSql.parse(
            "SELECT \"limit\", 'OFFSET; LIMIT' AS s, $$ pg_sleep(1); $$ AS d, E'it\\'s; limit' AS e FROM t");
    assertThat(p.parameterOrder()).isEmpty();
    assertThat(p.functions()).isEmpty();
  }

  @Test
  void functionCallsAreCollected() {
    assertThat(ContinuousSql.parse("SELECT lower(name), my_schema.score_of(id) FROM t").functions())
        .containsExactlyInAnyOrderElementsOf(List.of("lower", "score_of"));
  }

  /** Spellings that once slipped past the text check (a review found them). */
  @Test
  void callsHiddenByQuotingCommentsOrStringContinuationAreRefused() {
    refused("SELECT \"pg_advisory_lock\"(1) AS k FROM t", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT pg_advisory_lock/**/(1) AS k FROM t", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT pg_advisory_lock -- secret\n (1) AS k FROM t", ErrorCode.QUERY_NOT_ALLOWED);
    refused(
        "SELECT E'a'\n'\\' ' , pg_advisory_lock(1) AS z, ' --'\nAS k FROM t",
        ErrorCode.QUERY_NOT_ALLOWED);
    refused(
        "SELECT word AS k FROM ts_stat('SELECT to_tsvector(body) FROM posts')",
        ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT table_to_xml('posts', true, false, '') AS k", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT dblink_connect_u('secret') AS k", ErrorCode.QUERY_NOT_ALLOWED);
    refused("SELECT lo_from_bytea(0, 'secret') AS k", ErrorCode.QUERY_NOT_ALLOWED);
    // A plain string may continue on the next line: standard strings have no escapes to hide
    // behind.
    assertThat(ContinuousSql.parse("SELECT 'a'\n'b' AS k FROM t").functions()).isEmpty();
    assertThat(ContinuousSql.forbiddenInPlan("pg_catalog.pg_has_role"))
        .as("stable pg_* in RLS policies")
        .isFalse();
    assertThat(ContinuousSql.forbiddenInPlan("current_setting")).isFalse();
    assertThat(ContinuousSql.forbiddenInPlan("pg_catalog.ts_stat")).isTrue();
  }
}
