package io.weir.node.http;

import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A Server-Sent Events response read on a thread of its own: each event (its type, id and data)
 * queued as it arrives, heartbeats (comments, or events without data) counted. The stream's end is
 * an event too ({@link #CLOSED}), so a test waiting for an event learns at once that the node ended
 * the stream.
 */
final class SseEvents implements AutoCloseable {
  /** One event; {@code type} "message" when the event named none. */
  record Event(String type, String id, String data) {}

  /** Queued when the response ends. */
  static final Event CLOSED = new Event("(closed)", null, null);

  private final Stream<String> lines;
  private final BlockingQueue<Event> events = new LinkedBlockingQueue<>();
  private final Thread reader;
  private volatile int heartbeats;
  private volatile String lastId;

  SseEvents(HttpResponse<Stream<String>> response) {
    this.lines = response.body();
    this.reader =
        new Thread(
            () -> {
              String type = null;
              String id = null;
              StringBuilder data = null;
              try {
                for (var it = lines.iterator(); it.hasNext(); ) {
                  String line = it.next();
                  if (line.isEmpty()) {
                    // As a browser does: an event without data is not dispatched (Pekko's
                    // heartbeat is one).
                    if (data != null && data.length() == 0) {
                      heartbeats++;
                    } else if (data != null) {
                      if (id != null) {
                        lastId = id;
                      }
                      events.add(new Event(type == null ? "message" : type, id, data.toString()));
                    }
                    type = null;
                    id = null;
                    data = null;
                  } else if (line.startsWith(":")) {
                    heartbeats++;
                  } else if (line.startsWith("id:")) {
                    id = line.substring(3).trim();
                  } else if (line.startsWith("event:")) {
                    type = line.substring(6).trim();
                  } else if (line.startsWith("data:")) {
                    data = (data == null ? new StringBuilder() : data.append('\n'));
                    data.append(line.substring(5).trim());
                  }
                }
              } catch (RuntimeException ended) {
                // the response ended or was closed
              } finally {
                events.add(CLOSED);
              }
            },
            "sse-events");
    reader.setDaemon(true);
    reader.start();
  }

  /** The next event within {@code wait}, {@link #CLOSED} once the stream ended, or null. */
  Event next(Duration wait) throws InterruptedException {
    Event e = events.poll(wait.toMillis(), TimeUnit.MILLISECONDS);
    if (e == CLOSED) {
      events.add(CLOSED); // every later call sees the end too
    }
    return e;
  }

  /** The id of the last event that carried one (where a client resumes). */
  String lastId() {
    return lastId;
  }

  int heartbeats() {
    return heartbeats;
  }

  @Override
  public void close() {
    lines.close();
  }
}
