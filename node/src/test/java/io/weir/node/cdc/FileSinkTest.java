package io.weir.node.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.Changes;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FileSinkTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TableSchema ITEMS =
      new TableSchema(
          7,
          "public",
          "items",
          ReplicaIdentity.DEFAULT,
          List.of(
              new TableSchema.Column("id", 23, -1, true),
              new TableSchema.Column("v", 25, -1, false)));

  @TempDir Path dir;

  @Test
  void writesOneJsonLinePerTransactionWithEveryKindOfChange() throws Exception {
    Path file = dir.resolve("out.jsonl");
    FileSink sink = new FileSink(file, Runnable::run);
    Transaction t =
        new Transaction(
            42,
            Lsn.of(1000),
            Lsn.of(1008),
            Instant.EPOCH,
            List.of(
                new Change.Insert(ITEMS, TupleData.ofText("1", "a")),
                new Change.Update(
                    ITEMS,
                    OldTupleKind.KEY,
                    TupleData.ofText("1", null),
                    TupleData.ofText("2", null)),
                new Change.Delete(ITEMS, OldTupleKind.KEY, TupleData.ofText("2", null)),
                new Change.Truncate(List.of(ITEMS), false, false),
                new Change.Message("p", "hi".getBytes(StandardCharsets.UTF_8))),
            List.of());
    sink.deliver(t).toCompletableFuture().get(10, TimeUnit.SECONDS);
    sink.close();
    List<String> lines = Files.readAllLines(file);
    assertThat(lines).hasSize(1);
    JsonNode line = JSON.readTree(lines.get(0));
    assertThat(line.get("xid").asLong()).isEqualTo(42);
    assertThat(line.get("commitLsn").asText()).isEqualTo(Lsn.of(1000).toString());
    JsonNode changes = line.get("changes");
    assertThat(changes).hasSize(5);
    assertThat(changes.get(0).toString())
        .isEqualTo(
            "{\"op\":\"insert\",\"table\":\"public.items\",\"row\":{\"id\":\"1\",\"v\":\"a\"}}");
    assertThat(changes.get(1).toString())
        .isEqualTo(
            "{\"op\":\"update\",\"table\":\"public.items\",\"row\":{\"id\":\"2\",\"v\":null},\"old\":{\"id\":\"1\",\"v\":null},\"unchangedToast\":[]}");
    assertThat(changes.get(2).get("old").get("id").asText()).isEqualTo("2");
    assertThat(changes.get(3).get("tables").get(0).asText()).isEqualTo("public.items");
    assertThat(changes.get(4).get("content").binaryValue())
        .isEqualTo("hi".getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void streamsASinglePassTransactionAndCutsBackALineWhoseChangesFailHalfWay() throws Exception {
    Path file = dir.resolve("out.jsonl");
    FileSink sink = new FileSink(file, Runnable::run);
    sink.deliver(onePass(1, 20_000, -1)).toCompletableFuture().get(10, TimeUnit.SECONDS);
    long afterFirst = Files.size(file);
    assertThatThrownBy(
            () ->
                sink.deliver(onePass(2, 20_000, 15_000))
                    .toCompletableFuture()
                    .get(10, TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .hasRootCauseInstanceOf(IllegalStateException.class);
    assertThat(Files.size(file)).as("the half-written line is removed").isEqualTo(afterFirst);
    sink.deliver(onePass(3, 10, -1)).toCompletableFuture().get(10, TimeUnit.SECONDS);
    sink.close();
    List<String> lines = Files.readAllLines(file);
    assertThat(lines).as("only whole lines").hasSize(2);
    assertThat(JSON.readTree(lines.get(0)).get("changes")).hasSize(20_000);
    assertThat(JSON.readTree(lines.get(1)).get("xid").asLong()).isEqualTo(3);
  }

  /**
   * A transaction whose inserts are generated as they are read; fails at {@code failAt} if >= 0.
   */
  private static Transaction onePass(long xid, int rows, int failAt) {
    Changes changes =
        new Changes() {
          private boolean iterated;

          @Override
          public long count() {
            return rows;
          }

          @Override
          public boolean repeatable() {
            return false;
          }

          @Override
          public List<Change> asList() {
            throw new IllegalStateException("not repeatable");
          }

          @Override
          public Iterator<Change> iterator() {
            if (iterated) {
              throw new IllegalStateException("iterated twice");
            }
            iterated = true;
            return new Iterator<>() {
              int i;

              @Override
              public boolean hasNext() {
                return i < rows;
              }

              @Override
              public Change next() {
                if (i == failAt) {
                  throw new IllegalStateException("reading the changes failed");
                }
                i++;
                return new Change.Insert(ITEMS, TupleData.ofText("" + i, "value " + i));
              }
            };
          }
        };
    return new Transaction(
        xid,
        Lsn.of(xid * 100),
        Lsn.of(xid * 100 + 8),
        Instant.EPOCH,
        changes,
        List.of(),
        rows,
        Map.of(ITEMS, (long) rows));
  }
}
