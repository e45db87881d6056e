package io.weir.node.metrics;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * {@code weir.http.requests}: a timer per method, route template ({@link RouteTemplates}) and
 * status code, with fixed latency buckets. Its labels come from closed sets: the method from the
 * few HTTP methods (else {@code OTHER}), the route from the templates, the status from the code the
 * node answered. The time runs from the request reaching the routes to the response's head being
 * ready (a streamed body is not waited for).
 */
public final class HttpMetrics extends AllDirectives {
  /** Bucket bounds of the latency histogram. */
  static final Duration[] BUCKETS = {
    Duration.ofMillis(5),
    Duration.ofMillis(10),
    Duration.ofMillis(25),
    Duration.ofMillis(50),
    Duration.ofMillis(100),
    Duration.ofMillis(250),
    Duration.ofMillis(500),
    Duration.ofSeconds(1),
    Duration.ofMillis(2500),
    Duration.ofSeconds(5),
    Duration.ofSeconds(10),
    Duration.ofSeconds(30)
  };

  private static final Set<String> METHODS =
      Set.of("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS");

  private final MeterRegistry registry;
  private final RouteTemplates templates;

  /**
   * The timers made so far, by their labels (closed sets, so a bounded map): building and
   * registering a meter per request costs more than the request's own measurement.
   */
  private final ConcurrentHashMap<Labels, Timer> timers = new ConcurrentHashMap<>();

  private record Labels(String method, String template, int status) {}

  public HttpMetrics(MeterRegistry registry, RouteTemplates templates) {
    this.registry = registry;
    this.templates = templates;
  }

  /** {@code inner}, timed and counted. */
  public Route measured(Supplier<Route> inner) {
    Route route = inner.get();
    return extractRequest(
        request -> {
          long started = System.nanoTime();
          String method =
              METHODS.contains(request.method().value()) ? request.method().value() : "OTHER";
          String template = templates.label(request.getUri().path());
          return mapResponse(
              response -> {
                record(method, template, response.status().intValue(), System.nanoTime() - started);
                return response;
              },
              () -> route);
        });
  }

  void record(String method, String template, int status, long nanos) {
    timers
        .computeIfAbsent(
            new Labels(method, template, status),
            l ->
                Timer.builder("weir.http.requests")
                    .description("HTTP requests by method, route template and status code")
                    .tag("method", l.method())
                    .tag("route", l.template())
                    .tag("status", Integer.toString(l.status()))
                    .serviceLevelObjectives(BUCKETS)
                    .register(registry))
        .record(nanos, TimeUnit.NANOSECONDS);
  }
}
