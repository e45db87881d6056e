package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A client whose stream already ended must never fail its session: an SSE queue the client
 * cancelled refuses offers, and completing it again throws, as Pekko's bounded queue does. Before
 * the engine called its clients through {@link Session.Subscriber#offered} and {@link
 * Session.Subscriber#end}, that exception left the session stale and restarted the continuous
 * pipeline, ending every other client's stream too.
 */
class SessionSubscribersTest {

  /** Records what it was sent; once {@code gone}, refuses offers and throws on close. */
  private static final class Client implements Session.Subscriber {
    final List<String> received = new ArrayList<>();
    boolean gone;
    boolean throwOnOffer;
    int closes;

    @Override
    public boolean offer(Session.Event e) {
      if (throwOnOffer) {
        throw new IllegalStateException("the stream is terminated");
      }
      if (gone) {
        return false;
      }
      received.add(e.type() + "@" + e.sequence());
      return true;
    }

    @Override
    public void close() {
      closes++;
      if (gone || throwOnOffer) {
        throw new IllegalStateException("The queue has already been completed.");
      }
      gone = true;
    }
  }

  private static Session session() {
    return TestSessions.session(
        "cq_1",
        "scope",
        TestSessions.definition("score", 4, List.of("id", "score"), null, null, null),
        100);
  }

  private static List<ResultRow> result(int... scores) {
    List<ResultRow> rows = new ArrayList<>();
    for (int i = 0; i < scores.length; i++) {
      var key = JsonNodeFactory.instance.arrayNode().add(i);
      rows.add(
          new ResultRow(
              key.toString(),
              key,
              JsonNodeFactory.instance.objectNode().put("id", i).put("score", scores[i])));
    }
    return rows;
  }

  @Test
  void aClientWhoseStreamEndedIsDroppedWithoutFailingTheOthers() {
    Session s = session();
    s.commit(s.propose(result(30, 20), "0/1"));
    Client ended = new Client();
    Client cancelled = new Client();
    Client live = new Client();
    s.subscribe(ended, null, null, null);
    s.subscribe(cancelled, null, null, null);
    s.subscribe(live, null, null, null);
    ended.gone = true; // the client went away: offers refused, completing again throws
    cancelled.throwOnOffer = true;

    assertThatCode(() -> s.commit(s.propose(result(30, 25), "0/2"))).doesNotThrowAnyException();
    assertThat(live.received).containsExactly("InitialResult@1", "RowUpdated@2");
    assertThat(ended.closes).isEqualTo(1);
    assertThat(cancelled.closes).isEqualTo(1);

    s.commit(s.propose(result(30, 26), "0/3"));
    assertThat(live.received).endsWith("RowUpdated@3");
    assertThat(ended.closes).as("dropped after the first refusal").isEqualTo(1);
    assertThat(cancelled.closes).isEqualTo(1);
  }

  @Test
  void endingEveryStreamEndsEachOnceEvenIfOneAlreadyEnded() {
    Session s = session();
    s.commit(s.propose(result(10), "0/1"));
    Client ended = new Client();
    Client live = new Client();
    s.subscribe(ended, null, null, null);
    s.subscribe(live, null, null, null);
    ended.gone = true;

    assertThatCode(s::closeAll).doesNotThrowAnyException();
    assertThat(ended.closes).isEqualTo(1);
    assertThat(live.closes).isEqualTo(1);
    assertThat(live.gone).isTrue();
  }

  @Test
  void aClientGoneBeforeItsInitialResultIsNotKept() {
    Session s = session();
    s.commit(s.propose(result(10), "0/1"));
    Client gone = new Client();
    gone.gone = true;
    assertThatCode(() -> s.subscribe(gone, null, null, null)).doesNotThrowAnyException();
    s.commit(s.propose(result(11), "0/2"));
    assertThat(gone.closes).isEqualTo(1);
    assertThat(gone.received).isEmpty();
  }
}
