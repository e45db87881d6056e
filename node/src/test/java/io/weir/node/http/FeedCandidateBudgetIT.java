package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.feed.Feeds;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The candidate budget of queries and live starts ({@code weir.feeds.query.candidate-bytes}) counts
 * only the documents the reader may see: rows hidden from a principal neither make its query fail
 * nor change its answer, while a principal that may see more than the budget still gets {@code
 * result-too-large}. One partition (so every document is a candidate of the same scan) and a budget
 * of {@value #BUDGET} bytes, on the real JDBC journal in PostgreSQL.
 */
class FeedCandidateBudgetIT extends FeedNodeFixture {
  private static final long BUDGET = 8 * 1024;

  @Override
  String databaseName() {
    return "feed_candidate_budget_it";
  }

  @Override
  int partitions() {
    return 1;
  }

  @Override
  Feeds.Limits feedLimits() {
    return new Feeds.Limits(100, 1000, 4L << 20, 16L << 20, BUDGET, 50, 64, Duration.ofHours(24));
  }

  private static final String PAD = "zq".repeat(2000); // 4,000 bytes: three exceed the budget

  private JsonNode rows(String path, String query, String token) throws Exception {
    return ok(post(path, queryBody(query, null), token)).get("rows");
  }

  private void tooLarge(String path, String query, String token) throws Exception {
    HttpResponse<String> r = post(path, queryBody(query, null), token);
    error(r, 413, "result-too-large");
    // Nothing of any row: no id, no value, no ACL entry.
    assertThat(r.body())
        .doesNotContain("zq")
        .doesNotContain("lrg")
        .doesNotContain("tiny")
        .doesNotContain("huge");
  }

  /**
   * Writes, as the administrator, small rows {@code smallReader} may see and large rows only {@code
   * largeReader} may see, and checks both principals' queries and live starts.
   */
  private void check(
      String c, String smallReader, String largeReader, List<String> smallRows, String largeRow)
      throws Exception {
    for (int i = 0; i < smallRows.size(); i++) {
      ok(put(c, "s" + i, smallRows.get(i), ADMIN));
    }
    String q = "{\"collection\":\"" + c + "\",\"where\":{\"op\":\"exists\",\"field\":\"k\"}}";
    JsonNode alone = rows("/v1/query", q, smallReader);
    assertThat(alone).hasSize(smallRows.size());
    for (int i = 0; i < 3; i++) {
      ok(put(c, "lrg" + i, largeRow.replace("$i", Integer.toString(i)), ADMIN));
    }
    // The hidden rows change nothing for the small reader: the same rows, no failure.
    assertThat(rows("/v1/query", q, smallReader)).isEqualTo(alone);
    JsonNode live = ok(post("/v1/query/live/start", queryBody(q, null), smallReader));
    assertThat(live.get("rows")).isEqualTo(alone);
    ObjectNode read = queryBody(q, null);
    read.put("cursor", live.get("cursor").asText());
    assertThat(ok(post("/v1/query/live/read", read, smallReader)).get("deltas")).isEmpty();
    // A reader who may see the large rows exceeds the budget: the typed error, as for an
    // administrator, and the same answer.
    tooLarge("/v1/query", q, largeReader);
    tooLarge("/v1/query/live/start", q, largeReader);
    tooLarge("/v1/query", q, ADMIN);
    assertThat(post("/v1/query", queryBody(q, null), largeReader).body())
        .isEqualTo(post("/v1/query", queryBody(q, null), ADMIN).body());
  }

  @Test
  void aReaderWhoMaySeeMoreThanTheBudgetGetsResultTooLargeAndOtherCollectionsDoNotCount()
      throws Exception {
    String c = "cand-open";
    String open =
        principal("open-reader", List.of(), c, "DocumentsRead", "QueryRead", "ChangesRead");
    grant("open-reader", "cand-other", "DocumentsRead");
    grant("open-reader", "cand-other", "QueryRead");
    ok(put("cand-other", "o1", "{\"k\":1}", ADMIN));
    String other = "{\"collection\":\"cand-other\"}";
    assertThat(rows("/v1/query", other, open)).hasSize(1);
    for (int i = 0; i < 3; i++) {
      ok(put(c, "lrg" + i, "{\"k\":" + i + ",\"pad\":\"" + PAD + "\"}", ADMIN));
    }
    String q = "{\"collection\":\"" + c + "\"}";
    tooLarge("/v1/query", q, open);
    tooLarge("/v1/query/live/start", q, open);
    tooLarge("/v1/query", q, ADMIN);
    assertThat(rows("/v1/query", other, open))
        .as("another collection's documents in the same partition count for nothing")
        .hasSize(1);
  }

  @Test
  void rowsHiddenByAnAclDoNotCountAgainstTheReadersBudget() throws Exception {
    String c = "cand-acl";
    policy(c, List.of(), "acl", "acl");
    String[] grants = {"DocumentsRead", "QueryRead", "ChangesRead", "FieldUse:*"};
    String small = principal("acl-tiny", List.of("smalls"), c, grants);
    String large = principal("acl-huge", List.of(), c, grants);
    check(
        c,
        small,
        large,
        List.of(
            "{\"acl\":[\"acl-tiny\",\"acl-huge\"],\"k\":1}",
            "{\"acl\":[\"group:smalls\"],\"k\":2}"),
        "{\"acl\":[\"acl-huge\"],\"k\":$i,\"pad\":\"" + PAD + "\"}");
  }

  @Test
  void rowsOfAnotherOwnerDoNotCountAgainstTheReadersBudget() throws Exception {
    String c = "cand-owner";
    policy(c, List.of(), "owner", "owner");
    String[] grants = {"DocumentsRead", "QueryRead", "ChangesRead", "FieldUse:*"};
    String small = principal("owner-tiny", List.of(), c, grants);
    String large = principal("owner-huge", List.of(), c, grants);
    check(
        c,
        small,
        large,
        List.of("{\"owner\":\"owner-tiny\",\"k\":1}"),
        "{\"owner\":\"owner-huge\",\"k\":$i,\"pad\":\"" + PAD + "\"}");
  }
}
