package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.sharding.partition.Partition.Segment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

class OutboxSegmentsTest {
  /** The index as the tree map it replaces answered: the segment holding from, then to to. */
  private static List<Long> model(TreeMap<Long, Segment> m, long from, long to) {
    List<Long> out = new ArrayList<>();
    if (from <= to) {
      Long floor = m.floorKey(from);
      m.subMap(floor == null ? from : floor, true, to, true)
          .values()
          .forEach(s -> out.add(s.journalSequence()));
    }
    return out;
  }

  @Test
  void appendsPurgesAndRangesAnswerAsASortedMapDid() {
    for (int seed = 0; seed < 20; seed++) {
      Random r = new Random(seed);
      OutboxSegments index = new OutboxSegments();
      TreeMap<Long, Segment> model = new TreeMap<>();
      long next = 1;
      long journal = 1;
      for (int step = 0; step < 3_000; step++) {
        int op = r.nextInt(10);
        if (op < 6) {
          int entries = 1 + r.nextInt(5);
          Segment s = new Segment(journal++, entries, 10L * entries);
          index.append(next, s);
          model.put(next, s);
          next += entries + r.nextInt(2); // a purge can leave gaps before a segment
        } else if (op < 8 && !model.isEmpty()) {
          int n = 1 + r.nextInt(Math.min(40, model.size()));
          for (int i = 0; i < n; i++) {
            assertThat(index.firstPosition()).isEqualTo(model.firstKey());
            assertThat(index.first()).isEqualTo(model.firstEntry().getValue());
            index.removeFirst();
            model.pollFirstEntry();
          }
        } else {
          long from = r.nextLong(next + 5) - 2;
          long to = from + r.nextInt(30) - 3;
          List<Long> got = new ArrayList<>();
          index.journalSequences(from, to, got::add);
          assertThat(got)
              .as("seed %s step %s: %s..%s", seed, step, from, to)
              .isEqualTo(model(model, from, to));
        }
        assertThat(index.size()).isEqualTo(model.size());
        assertThat(index.isEmpty()).isEqualTo(model.isEmpty());
      }
      assertThat(index.toMap()).isEqualTo(model);
      OutboxSegments copy = index.copy();
      assertThat(copy).isEqualTo(index).hasSameHashCodeAs(index);
      OutboxSegments rebuilt = new OutboxSegments();
      model.forEach(rebuilt::append);
      assertThat(rebuilt).isEqualTo(index);
      if (!model.isEmpty()) {
        copy.removeFirst();
        assertThat(copy).as("a copy shares nothing").isNotEqualTo(index);
        assertThat(index.toMap()).isEqualTo(model);
      }
    }
  }

  @Test
  void aSegmentNotPastTheLastGoesInItsPlaceAndAnEmptyIndexHasNoFirst() {
    OutboxSegments index = new OutboxSegments();
    assertThatThrownBy(index::first).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(index::removeFirst).isInstanceOf(IllegalStateException.class);
    TreeMap<Long, Segment> model = new TreeMap<>();
    Random r = new Random(7);
    for (int i = 0; i < 500; i++) {
      long first = r.nextInt(300);
      Segment s = new Segment(i, 1 + r.nextInt(3), i);
      index.append(first, s);
      model.put(first, s);
      if (r.nextInt(7) == 0) {
        index.removeFirst();
        model.pollFirstEntry();
      }
    }
    assertThat(index.toMap()).as("as a sorted map puts them").isEqualTo(model);
    assertThat(index.size()).isEqualTo(model.size());
    List<Long> got = new ArrayList<>();
    index.journalSequences(0, 300, got::add);
    assertThat(got).isEqualTo(model(model, 0, 300));
  }

  @Test
  void aPurgedBacklogGivesItsMemoryBack() {
    OutboxSegments index = new OutboxSegments();
    for (int i = 0; i < 100_000; i++) {
      index.append(i, new Segment(i, 1, 1));
    }
    for (int i = 0; i < 99_990; i++) {
      index.removeFirst();
    }
    assertThat(index.toMap()).hasSize(10).containsKey(99_999L);
    assertThat(index.capacity()).isLessThanOrEqualTo(64);
  }
}
