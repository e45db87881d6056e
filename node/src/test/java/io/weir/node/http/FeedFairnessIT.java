package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.protocol.partition.Partitioning;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pages of the changes feed share their limit and byte budget out round-robin over the partitions
 * (issue 26): with 256 partitions, the low half busy, every partition's change still comes within
 * ceil(partitions / per page) + 1 pages. Before, pages were filled from partition 0 upward and the
 * high partitions waited as long as the low ones had entries.
 */
class FeedFairnessIT extends FeedNodeFixture {
  private static final Logger log = LoggerFactory.getLogger(FeedFairnessIT.class);
  private static final int P = 256;
  private static final String BODY = "{\"v\":\"0123456789\"}";

  @Override
  String databaseName() {
    return "feed_fairness_it";
  }

  @Override
  int partitions() {
    return P;
  }

  /** {@code perPartition} ids of {@code collection} in each partition. */
  private static Map<Integer, List<String>> ids(String collection, int perPartition) {
    Map<Integer, List<String>> ids = new HashMap<>();
    int complete = 0;
    for (int n = 0; complete < P; n++) {
      String id = "i" + n;
      List<String> in =
          ids.computeIfAbsent(Partitioning.partitionOf(collection, id, P), k -> new ArrayList<>());
      if (in.size() < perPartition) {
        in.add(id);
        if (in.size() == perPartition) {
          complete++;
        }
      }
    }
    return ids;
  }

  /**
   * Three changes in each of the low 128 partitions and one in each high one, written after {@code
   * cursor}.
   */
  private void write(String collection, Map<Integer, List<String>> ids, String token)
      throws Exception {
    for (int p = 0; p < P; p++) {
      for (String id : ids.get(p).subList(0, p < P / 2 ? 3 : 1)) {
        ok(put(collection, id, BODY, token));
      }
    }
  }

  /**
   * Reads pages from {@code cursor} until a change of every partition was seen (at most 40 pages);
   * returns the page (1-based) each partition's first change came in.
   */
  private Map<Integer, Integer> pagesUntilEveryPartition(
      String collection, String cursor, String token, Integer limit, Long maxBytes)
      throws Exception {
    Map<Integer, Integer> firstPage = new HashMap<>();
    for (int page = 1; page <= 40 && firstPage.size() < P; page++) {
      JsonNode r = changes(collection, cursor, true, token, limit, maxBytes);
      for (JsonNode c : r.get("changes")) {
        firstPage.putIfAbsent(c.get("partition").asInt(), page);
      }
      cursor = r.get("cursor").asText();
    }
    assertThat(firstPage).as("a change of every partition came").hasSize(P);
    return firstPage;
  }

  @Test
  void theLimitIsSharedRoundRobinWhileLowPartitionsKeepWriting() throws Exception {
    String w = principal("fair-writer", List.of(), "fair", "DocumentsWrite", "ChangesRead");
    Map<Integer, List<String>> ids = ids("fair", 4);
    String cursor = changes("fair", "now", false, w, null, null).get("cursor").asText();
    write("fair", ids, w);
    // The low partitions keep writing while the reader pages.
    AtomicBoolean stop = new AtomicBoolean();
    AtomicReference<Throwable> failed = new AtomicReference<>();
    Thread busy =
        new Thread(
            () -> {
              try {
                for (int n = 0; !stop.get(); n++) {
                  ok(put("fair", ids.get(n % (P / 2)).get(3), "{\"n\":" + n + "}", w));
                }
              } catch (Throwable t) {
                failed.set(t);
              }
            },
            "fair-busy-writer");
    busy.start();
    Map<Integer, Integer> firstPage;
    try {
      firstPage = pagesUntilEveryPartition("fair", cursor, w, 100, null);
    } finally {
      stop.set(true);
      busy.join();
    }
    assertThat(failed.get()).isNull();
    int worst = firstPage.values().stream().mapToInt(Integer::intValue).max().orElseThrow();
    log.info("feed fairness (limit 100, 256 partitions): last partition served on page {}", worst);
    assertThat(worst)
        .as("every partition within ceil(256 / 100) + 1 pages")
        .isLessThanOrEqualTo((P + 99) / 100 + 1);
  }

  @Test
  void theByteBudgetIsSharedRoundRobin() throws Exception {
    String w = principal("fair-bytes", List.of(), "fair-bytes", "DocumentsWrite", "ChangesRead");
    Map<Integer, List<String>> ids = ids("fair-bytes", 3);
    String cursor = changes("fair-bytes", "now", false, w, null, null).get("cursor").asText();
    write("fair-bytes", ids, w);
    int perPage = 40;
    Map<Integer, Integer> firstPage =
        pagesUntilEveryPartition("fair-bytes", cursor, w, 1000, (long) perPage * BODY.length());
    int worst = firstPage.values().stream().mapToInt(Integer::intValue).max().orElseThrow();
    log.info(
        "feed fairness (40 changes' bytes a page, 256 partitions): last partition served on page {}",
        worst);
    assertThat(worst)
        .as("every partition within ceil(256 / 40) + 1 pages")
        .isLessThanOrEqualTo((P + perPage - 1) / perPage + 1);
  }
}
