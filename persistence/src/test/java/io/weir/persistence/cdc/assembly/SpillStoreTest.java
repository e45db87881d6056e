package io.weir.persistence.cdc.assembly;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SpillStoreTest {
  @TempDir Path dir;

  private static ByteBuffer payload(int i, int size) {
    byte[] b = new byte[size];
    byte[] tag = ("p" + i + ";").getBytes(StandardCharsets.UTF_8);
    System.arraycopy(tag, 0, b, 0, Math.min(tag.length, size));
    return ByteBuffer.wrap(b);
  }

  private static List<String> read(SpillStore.Buffer b) {
    List<String> out = new ArrayList<>();
    try (SpillStore.Cursor c = b.cursor()) {
      while (c.next()) {
        String s = new String(c.array(), c.offset(), c.length(), StandardCharsets.UTF_8);
        out.add(s.substring(0, s.indexOf(';')) + "/" + c.length());
      }
    }
    return out;
  }

  private static List<String> expected(int n, int size) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add("p" + i + "/" + size);
    }
    return out;
  }

  private long files() throws Exception {
    try (Stream<Path> s = Files.list(dir.resolve("pipe"))) {
      return s.count();
    } catch (java.nio.file.NoSuchFileException e) {
      return 0;
    }
  }

  @Test
  void withinTheMemoryBoundPayloadsStayInMemoryAndCanBeReadAgainUntilReleased() {
    SpillStore store = new SpillStore(dir.resolve("pipe"), 1 << 20, 1 << 20);
    SpillStore.Buffer b = store.open(7);
    for (int i = 0; i < 500; i++) {
      b.append(payload(i, 100 + i % 50));
    }
    b.seal();
    assertThat(b.spilled()).isFalse();
    assertThat(store.memoryInUse()).isPositive();
    List<String> first = read(b);
    assertThat(first).hasSize(500);
    assertThat(first.get(499)).isEqualTo("p499/" + (100 + 499 % 50));
    assertThat(read(b)).as("in memory: repeatable").isEqualTo(first);
    b.release();
    assertThat(store.memoryInUse()).as("released memory is returned to the bound").isZero();
    assertThatThrownBy(b::cursor)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("released");
  }

  @Test
  void pastTheMemoryBoundATransactionMovesToAnOwnerOnlyFileReadOnceAndDeletedOnRelease()
      throws Exception {
    SpillStore store = new SpillStore(dir.resolve("pipe"), 10_000, 1 << 20);
    SpillStore.Buffer b = store.open(42);
    for (int i = 0; i < 300; i++) {
      b.append(payload(i, 200));
    }
    assertThat(b.spilled()).isTrue();
    assertThat(store.memoryInUse()).as("what was in memory went to the file").isZero();
    assertThat(store.bytesOnDisk()).isEqualTo(300 * 204);
    b.seal();
    assertThat(files()).isEqualTo(1);
    try (Stream<Path> s = Files.list(dir.resolve("pipe"))) {
      Path f = s.findFirst().orElseThrow();
      assertThat(f.getFileName().toString()).startsWith("txn-42-").endsWith(".spill");
      assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(f)))
          .isEqualTo("rw-------");
      assertThat(Files.size(f)).isEqualTo(300 * 204);
    }
    assertThat(read(b)).as("every payload, in order").isEqualTo(expected(300, 200));
    assertThatThrownBy(b::cursor)
        .as("a file is read once")
        .isInstanceOf(IllegalStateException.class);
    b.release();
    assertThat(files()).isZero();
    assertThat(store.bytesOnDisk()).isZero();
  }

  @Test
  void theMemoryBoundIsSharedByAllBuffersUntilTheyAreReleased() {
    SpillStore store = new SpillStore(dir.resolve("pipe"), 20_000, 1 << 20);
    SpillStore.Buffer committed = store.open(1);
    for (int i = 0; i < 50; i++) {
      committed.append(payload(i, 300));
    }
    committed.seal(); // committed, not yet delivered: still holds its memory
    SpillStore.Buffer open = store.open(2);
    for (int i = 0; i < 50; i++) {
      open.append(payload(i, 300));
    }
    assertThat(committed.spilled()).isFalse();
    assertThat(open.spilled()).as("the second transaction did not fit beside the first").isTrue();
    assertThat(store.memoryInUse()).isLessThanOrEqualTo(20_000);
    committed.release();
    SpillStore.Buffer third = store.open(3);
    third.append(payload(0, 300));
    assertThat(third.spilled())
        .as("memory freed by a delivered transaction is used again")
        .isFalse();
  }

  @Test
  void pastMaxSpillBytesAppendHaltsValueFree() {
    SpillStore store = new SpillStore(dir.resolve("pipe"), 1_000, 5_000);
    SpillStore.Buffer b = store.open(9);
    assertThatThrownBy(
            () -> {
              for (int i = 0; i < 100; i++) {
                b.append(
                    ByteBuffer.wrap(
                        ("secret-row-value-" + i + "-" + "x".repeat(80))
                            .getBytes(StandardCharsets.UTF_8)));
              }
            })
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.SPILL_LIMIT_EXCEEDED))
        .hasMessageContaining("max-bytes")
        .hasMessageNotContaining("secret");
    assertThat(store.bytesOnDisk()).isLessThanOrEqualTo(5_000);
    store.close();
    assertThat(store.bytesOnDisk()).isZero();
  }

  @Test
  void closeReleasesEverythingAndCleanRemovesOnlyStaleSpillFiles() throws Exception {
    Path pipe = dir.resolve("pipe");
    SpillStore store = new SpillStore(pipe, 100, 1 << 20);
    SpillStore.Buffer open = store.open(5);
    open.append(payload(0, 500));
    SpillStore.Buffer sealed = store.open(6);
    sealed.append(payload(0, 500));
    sealed.seal();
    assertThat(files()).isEqualTo(2);
    store.close();
    assertThat(files()).as("a finished run leaves no files").isZero();
    assertThat(open.released()).isTrue();
    assertThatThrownBy(() -> store.open(8)).isInstanceOf(IllegalStateException.class);

    Files.writeString(pipe.resolve("txn-1-1.spill"), "left by a crashed run");
    Files.writeString(pipe.resolve("notes.txt"), "not ours");
    assertThat(SpillStore.clean(pipe)).isEqualTo(1);
    assertThat(Files.exists(pipe.resolve("notes.txt"))).isTrue();
    assertThat(SpillStore.clean(dir.resolve("missing"))).isZero();
  }

  @Test
  void thePipelineNameMustBeAnIdentifierBeforeItBecomesAPath() {
    assertThat(SpillStore.pipelineDirectory(dir, "orders")).isEqualTo(dir.resolve("orders"));
    assertThatThrownBy(() -> SpillStore.pipelineDirectory(dir, "../../etc"))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.INVALID_IDENTIFIER))
        .hasMessageNotContaining("etc");
  }

  @Test
  void withoutADirectoryNothingGoesToDisk() {
    SpillStore store = new SpillStore(null, 100, 100);
    SpillStore.Buffer b = store.open(1);
    for (int i = 0; i < 100; i++) {
      b.append(payload(i, 100));
    }
    b.seal();
    assertThat(b.spilled()).isFalse();
    assertThat(read(b)).isEqualTo(expected(100, 100));
  }
}
