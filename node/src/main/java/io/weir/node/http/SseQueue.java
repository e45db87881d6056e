package io.weir.node.http;

import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pekko.http.javadsl.model.sse.ServerSentEvent;
import org.apache.pekko.stream.BoundedSourceQueue;
import org.apache.pekko.stream.QueueOfferResult;

/**
 * An SSE response's bounded event queue that ends once. An offer is false once the queue ended,
 * when it is full (the client is behind) or when the client already cancelled it; ending a queue
 * the client cancelled is not an error. Shared by the continuous queries' and the live queries'
 * streams, so a client that left can never throw into the code that feeds it.
 */
final class SseQueue {
  private final BoundedSourceQueue<ServerSentEvent> queue;
  private final AtomicBoolean ended = new AtomicBoolean();

  SseQueue(BoundedSourceQueue<ServerSentEvent> queue) {
    this.queue = queue;
  }

  boolean ended() {
    return ended.get();
  }

  boolean offer(ServerSentEvent event) {
    if (ended.get()) {
      return false;
    }
    try {
      return queue.offer(event) instanceof QueueOfferResult.Enqueued$;
    } catch (RuntimeException cancelled) {
      return false;
    }
  }

  /** Completes the stream, the first time only. */
  void end() {
    if (ended.compareAndSet(false, true)) {
      try {
        queue.complete();
      } catch (IllegalStateException alreadyEnded) {
        // completed or cancelled by the other side
      }
    }
  }
}
