package io.weir.node.feed;

import io.weir.node.auth.Principal;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.query.Q1Query;
import io.weir.sharding.partition.OutboxReader;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.pekko.pattern.AskTimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pushed live queries: each open stream reads its live query's next page ({@link Feeds#readLive})
 * when a partition's outbox grew somewhere in the cluster ({@link #wake}, from {@link
 * TailSignals}), not on a timer, so an idle stream costs nothing but a safety read every {@code
 * recheck}. Pages with deltas become events; a cursor moved over changes that matched nothing
 * becomes a progress event at most once a second, so a client resuming with its last event id reads
 * little again.
 *
 * <p>A stream is the polling read's loop run by the node: the same cursor, the same checks (the
 * principal as the node last loaded it, its grants on the collection and the predicate's fields,
 * the cursor's fences) before every read, and the same refusals, sent as a final {@code end} event
 * before the stream closes. Reads that fail for a retryable reason are tried again with backoff for
 * at most {@code retryFor}, then the stream ends with {@code unavailable}. At most {@code maxReads}
 * stream reads run at once on the node (woken streams queue, each at most once), so a wake of every
 * stream never floods the read admission the request routes share.
 */
public final class LiveStreams implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(LiveStreams.class);

  /** The least time between two progress events of one stream. */
  static final long PROGRESS_GAP_NANOS = TimeUnit.SECONDS.toNanos(1);

  /**
   * @param maxPerNode streams open on this node at most
   * @param maxPerPrincipal streams one principal may hold open on this node
   * @param maxReads stream reads running at once on this node
   * @param recheck how long a stream may go without a read (a safety net for a lost signal)
   * @param retryFor how long retryable failures are retried before the stream ends
   * @param buffer events a slow client may have queued before its stream is ended
   * @param heartbeat how often an idle stream sends a heartbeat comment
   */
  public record Settings(
      int maxPerNode,
      int maxPerPrincipal,
      int maxReads,
      Duration recheck,
      Duration retryFor,
      int buffer,
      Duration heartbeat) {
    public static final Settings DEFAULTS =
        new Settings(
            2048,
            1024,
            16,
            Duration.ofSeconds(30),
            Duration.ofSeconds(60),
            64,
            Duration.ofSeconds(15));
  }

  /** Where a stream's events go: the HTTP response's queue. Each method returns at once. */
  public interface Sink {
    /** A page with deltas; false when the client is gone or too far behind. */
    boolean page(Feeds.LivePage page);

    /** The cursor moved over changes no delta came from; false as for {@link #page}. */
    boolean progress(String cursor);

    /** The stream's last event: why it ends (a refusal, as the polling read would answer). */
    void end(ErrorCode code, String message);

    /** Ends the stream without an event (the client left, or is too far behind). */
    void close();
  }

  /**
   * Checks a principal as last loaded may still read the query: null when it may, else the refusal
   * (code and value-free message).
   */
  public interface Access {
    Refusal check(Principal principal, Q1Query query);
  }

  /**
   * Reads a live query's next page after a cursor, no partition past {@code through} (null: to
   * every tail): {@link Feeds#readLive(Principal, Q1Query, String, int, long, long[])}.
   */
  @FunctionalInterface
  public interface Reader {
    CompletionStage<Feeds.LivePage> read(
        Principal principal,
        Q1Query query,
        String cursor,
        int limit,
        long maxBytes,
        long[] through);
  }

  /** A typed refusal with a value-free message. */
  public record Refusal(ErrorCode code, String message) {}

  private final Reader feeds;
  private final Settings settings;
  private final Function<Principal, Optional<Principal>> current;
  private final Supplier<CompletionStage<Void>> fresh;
  private final Access access;
  private final ScheduledExecutorService executor;
  private final Set<Stream> open = ConcurrentHashMap.newKeySet();
  private final Map<String, AtomicInteger> perPrincipal = new ConcurrentHashMap<>();
  private final AtomicInteger total = new AtomicInteger();
  private final Queue<Stream> woken = new ConcurrentLinkedQueue<>();
  private final AtomicInteger reading = new AtomicInteger();
  private final Map<GroupKey, Group> groups = new ConcurrentHashMap<>();

  /**
   * Whether idle streams standing together ride one lead (false only in tests of the shared reads
   * beneath).
   */
  private final boolean cohorts;

  /**
   * Set while this thread runs {@link #drain}: a permit given back inside it needs no new drain.
   */
  private final ThreadLocal<boolean[]> draining = ThreadLocal.withInitial(() -> new boolean[1]);

  private volatile boolean closed;

  /**
   * @param current the principal as this node last loaded it (empty: revoked), so a stream follows
   *     grant changes without keeping the client's token
   * @param fresh completes once that view is confirmed current within the principals' staleness
   *     bound (fails when it cannot be): every read and every sweep waits for it, so a stream is
   *     never served from a view older than a request would be
   */
  public LiveStreams(
      Reader feeds,
      Settings settings,
      Function<Principal, Optional<Principal>> current,
      Supplier<CompletionStage<Void>> fresh,
      Access access) {
    this(feeds, settings, current, fresh, access, true);
  }

  LiveStreams(
      Reader feeds,
      Settings settings,
      Function<Principal, Optional<Principal>> current,
      Supplier<CompletionStage<Void>> fresh,
      Access access,
      boolean cohorts) {
    this.cohorts = cohorts;
    this.feeds = feeds;
    this.settings = settings;
    this.current = current;
    this.fresh = fresh;
    this.access = access;
    ScheduledThreadPoolExecutor pool =
        new ScheduledThreadPoolExecutor(
            2,
            r -> {
              Thread t = new Thread(r, "weir-live-streams");
              t.setDaemon(true);
              return t;
            });
    pool.setRemoveOnCancelPolicy(true);
    this.executor = pool;
    long tick = Math.max(100, Math.min(1000, settings.recheck().toMillis() / 4));
    executor.scheduleWithFixedDelay(this::sweep, tick, tick, TimeUnit.MILLISECONDS);
  }

  public Settings settings() {
    return settings;
  }

  /** Streams open on this node now. */
  public int open() {
    return total.get();
  }

  /**
   * A slot for a new stream of {@code principal}, or the refusal when this node or this principal
   * holds the most streams allowed. The slot is given back by {@link Stream#close} (or {@link
   * #release} when the stream never started).
   */
  public Refusal admit(Principal principal) {
    if (closed) {
      return new Refusal(ErrorCode.UNAVAILABLE, "this node is shutting down; retry on another");
    }
    if (total.incrementAndGet() > settings.maxPerNode()) {
      total.decrementAndGet();
      return new Refusal(
          ErrorCode.TOO_MANY_STREAMS,
          "this node has " + settings.maxPerNode() + " live-query streams open; retry later");
    }
    boolean[] over = {false};
    perPrincipal.compute(
        principal.id(),
        (id, held) -> {
          if (held != null && held.get() >= settings.maxPerPrincipal()) {
            over[0] = true;
            return held;
          }
          AtomicInteger count = held == null ? new AtomicInteger() : held;
          count.incrementAndGet();
          return count;
        });
    if (over[0]) {
      total.decrementAndGet();
      return new Refusal(
          ErrorCode.TOO_MANY_STREAMS,
          "this principal has "
              + settings.maxPerPrincipal()
              + " live-query streams open on this node; close one first");
    }
    return null;
  }

  /** Gives back a slot {@link #admit} granted to a stream that never started. */
  public void release(Principal principal) {
    // The entry goes with the principal's last stream: the map holds only principals with streams.
    perPrincipal.computeIfPresent(
        principal.id(), (id, held) -> held.decrementAndGet() <= 0 ? null : held);
    total.decrementAndGet();
  }

  /** Principals holding streams on this node now (for tests). */
  int principalsHolding() {
    return perPrincipal.size();
  }

  /**
   * Starts following from {@code cursor}, where the first page (already read and sent by the
   * caller, which answered the request's refusals) left it.
   */
  public Stream start(
      Principal principal, Q1Query query, String cursor, int limit, long maxBytes, Sink sink) {
    Stream s = new Stream(principal, query, cursor, limit, maxBytes, sink);
    open.add(s);
    if (closed) {
      s.end(ErrorCode.UNAVAILABLE, "this node is shutting down; resume on another");
    }
    return s;
  }

  /**
   * Runs {@code unclaimed} after {@code delay} (the caller decides, with a flag, whether to act).
   */
  public void unlessRunWithin(Duration delay, Runnable unclaimed) {
    try {
      executor.schedule(unclaimed, delay.toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.RejectedExecutionException shuttingDown) {
      unclaimed.run();
    }
  }

  /** Some partition's outbox grew: every stream reads its next page (coalesced per stream). */
  public void wake() {
    long signalled = System.nanoTime();
    for (Stream s : open) {
      if (s.riding == null) { // a rider's lead has the same signal
        s.wake(signalled);
      }
    }
  }

  /**
   * Ends every stream whose principal lost access (as the view confirmed current shows it); wakes
   * those not read for {@code recheck}. When the view cannot be confirmed, nothing is ended here:
   * the streams' own reads wait for the same confirmation and fail closed.
   */
  private void sweep() {
    long idleFor = 2 * settings.recheck().toNanos();
    long started = System.nanoTime();
    groups.values().removeIf(g -> started - g.used > idleFor);
    if (open.isEmpty()) {
      return;
    }
    CompletionStage<Void> confirmed;
    try {
      confirmed = fresh.get();
    } catch (RuntimeException e) {
      confirmed = CompletableFuture.failedFuture(e);
    }
    confirmed.whenCompleteAsync(
        (v, e) -> {
          try {
            long now = System.nanoTime();
            long recheck = settings.recheck().toNanos();
            for (Stream s : open) {
              Refusal refused = e == null ? s.refusal() : null;
              if (refused != null && !refused.code().retryable()) {
                s.end(refused.code(), refused.message());
              } else if (now - s.lastRead > recheck) {
                s.wake();
              }
            }
          } catch (RuntimeException failed) {
            log.warn("checking live-query streams failed: {}", SafeErrors.describe(failed));
          }
        },
        executor);
  }

  /**
   * Starts queued stream reads while fewer than {@code maxReads} run. A stream whose turn ends
   * without a read (ended, refused) gives its permit back here, in this loop, not by recursion.
   */
  private void drain() {
    boolean[] inDrain = draining.get();
    if (inDrain[0]) {
      return; // the loop below, further up this thread's stack, goes on
    }
    inDrain[0] = true;
    try {
      while (!closed) {
        int now = reading.get();
        if (now >= settings.maxReads()) {
          return;
        }
        Stream next = woken.peek();
        if (next == null) {
          return;
        }
        if (!reading.compareAndSet(now, now + 1)) {
          continue;
        }
        next = woken.poll();
        if (next == null) {
          reading.decrementAndGet();
          continue;
        }
        next.permit.set(true);
        if (!next.read()) {
          next.givePermitBack();
        }
      }
    } finally {
      inDrain[0] = false;
    }
  }

  @Override
  public void close() {
    closed = true;
    for (Stream s : open) {
      s.end(ErrorCode.UNAVAILABLE, "this node is shutting down; resume on another");
    }
    executor.shutdownNow();
  }

  /** One pushed live query. */
  public final class Stream {
    private final Principal principal;
    private final Q1Query query;
    private final int limit;
    private final long maxBytes;
    private final Sink sink;

    /** Queued or reading: a wake meanwhile only sets {@link #again}. */
    private final AtomicBoolean busy = new AtomicBoolean();

    private final AtomicBoolean again = new AtomicBoolean();
    private final AtomicBoolean ended = new AtomicBoolean();

    /** Holds one of the node's {@code maxReads} permits (from {@link #drain} to its turn's end). */
    private final AtomicBoolean permit = new AtomicBoolean();

    private final String fingerprint;
    private volatile String cursor;

    /** Where {@link #cursor} stands; null until the first read of this stream. */
    private volatile Feeds.LiveAt at;

    /** The last read stopped at the group's front, so the next reads past it. */
    private volatile boolean capped;

    /** When the latest signal for this stream came: a shared read started before may miss it. */
    private final AtomicLong wokenAt = new AtomicLong(System.nanoTime());

    /** This turn took a shared read that began before the turn's signal: read again after it. */
    private volatile boolean readAgain;

    /** The group of this stream's latest own read: where it meets streams to ride with. */
    private volatile Group group;

    /**
     * The lead this stream rides (null: it reads for itself): it has no turns of its own and gets
     * every page of the lead's reads. Written under the lead's lock.
     */
    private volatile Stream riding;

    /** Streams riding this one; guarded by this stream's lock, as is {@link #at} while leading. */
    private final java.util.Set<Stream> riders = new java.util.LinkedHashSet<>();

    /** Where this stream is registered as a lead ({@link Group#leads}); guarded by its lock. */
    private Group leadsIn;

    private String leadsAt;

    private volatile long lastRead = System.nanoTime();
    private long lastEvent = System.nanoTime();
    private long failingSince; // 0: the last read succeeded
    private int failures;
    private volatile boolean backingOff;

    private Stream(
        Principal principal, Q1Query query, String cursor, int limit, long maxBytes, Sink sink) {
      this.principal = principal;
      this.query = query;
      this.cursor = cursor;
      this.limit = limit;
      this.maxBytes = maxBytes;
      this.sink = sink;
      this.fingerprint = query.collection() + '/' + HexFormat.of().formatHex(query.fingerprint());
    }

    public void wake() {
      wake(System.nanoTime());
    }

    /** Woken by a signal received at {@code signalled} (every stream of one signal: the same). */
    private void wake(long signalled) {
      if (ended.get()) {
        return;
      }
      Stream lead = riding;
      if (lead != null) {
        lead.wake(signalled); // the lead reads for both (leads ride nobody: no chain)
        return;
      }
      wokenAt.accumulateAndGet(signalled, (held, given) -> given - held > 0 ? given : held);
      if (busy.compareAndSet(false, true)) {
        woken.add(this);
        drain();
      } else {
        again.set(true);
      }
    }

    /** Null when the principal as last loaded may still read this query; else the refusal. */
    private Refusal refusal() {
      return refusal(current.apply(principal));
    }

    private Refusal refusal(Optional<Principal> now) {
      if (now.isEmpty()) {
        return new Refusal(
            ErrorCode.UNAUTHENTICATED, "the principal of this stream was revoked or removed");
      }
      return access.check(now.get(), query);
    }

    /**
     * Reads the next page once the principals' view is confirmed current; true when a read was
     * started (its completion gives the permit back), false when this turn ended at once.
     */
    private boolean read() {
      try {
        if (ended.get()) {
          busy.set(false);
          return false;
        }
        again.set(false);
        lastRead = System.nanoTime();
        CompletionStage<Feeds.LivePage> page;
        page = confirmed().thenCompose(v -> readPage());
        page.whenCompleteAsync(this::completed, executor);
        return true;
      } catch (RuntimeException | Error unexpected) {
        log.error("a live-query stream failed unexpectedly: {}", SafeErrors.describe(unexpected));
        end(ErrorCode.INTERNAL, "internal error; see the node's log");
        busy.set(false);
        return false;
      }
    }

    /** The principals' view confirmed current, or a retryable refusal. */
    private CompletionStage<Void> confirmed() {
      CompletionStage<Void> check;
      try {
        check = fresh.get();
      } catch (RuntimeException e) {
        check = CompletableFuture.failedFuture(e);
      }
      return check.handle(
          (v, e) -> {
            if (e != null) {
              throw new Feeds.Refused(
                  ErrorCode.UNAVAILABLE, "the principals could not be confirmed current; retrying");
            }
            return null;
          });
    }

    /**
     * The read itself, after the principal and its grants were checked again: another stream's read
     * from where this one stands when its group has one (this stream's permit goes back at once: it
     * reads nothing itself), else a read up to the group's front when this stream is elsewhere,
     * else a read to every tail that the group's streams arriving here share.
     */
    private CompletionStage<Feeds.LivePage> readPage() {
      Optional<Principal> now = current.apply(principal);
      Refusal refused = refusal(now);
      if (refused != null) {
        return CompletableFuture.failedFuture(new Feeds.Refused(refused.code(), refused.message()));
      }
      Principal p = now.get();
      Group group =
          groups.computeIfAbsent(
              new GroupKey(p.id(), p.policyEpoch(), fingerprint, limit, maxBytes),
              k -> new Group());
      group.used = System.nanoTime();
      this.group = group;
      Feeds.LiveAt from = at;
      boolean wasCapped = capped;
      long signalled = wokenAt.get();
      capped = false;
      readAgain = false;
      if (from != null) {
        Flight shared = group.read(from.key());
        if (shared != null) {
          return join(shared, signalled);
        }
      }
      Feeds.LiveAt front = group.front();
      if (front != null && !wasCapped && (from == null || ahead(front, from))) {
        capped = true;
        return feeds.read(p, query, cursor, limit, maxBytes, front.positions());
      }
      if (from == null) {
        return feeds
            .read(p, query, cursor, limit, maxBytes, null)
            .thenApply(
                page -> {
                  group.advanced(page);
                  return page;
                });
      }
      Flight flight = group.start(from.key(), this);
      if (flight.owner != this) {
        return join(flight, signalled);
      }
      CompletionStage<Feeds.LivePage> read;
      try {
        read = feeds.read(p, query, cursor, limit, maxBytes, null);
      } catch (RuntimeException e) {
        read = CompletableFuture.failedFuture(e);
      }
      read.whenComplete((page, e) -> group.finished(flight, page, e));
      return flight.page;
    }

    /**
     * Takes another stream's read from where this one stands (this stream's permit goes back: it
     * reads nothing itself); when that read began before this turn's signal it may not hold the
     * change signalled, so this stream reads again after it.
     */
    private CompletionStage<Feeds.LivePage> join(Flight shared, long signalled) {
      readAgain = shared.started - signalled < 0;
      givePermitBack();
      return shared.page;
    }

    /** Gives this stream's read permit back, if it holds one, to the next queued stream. */
    private void givePermitBack() {
      if (permit.getAndSet(false)) {
        reading.decrementAndGet();
        drain();
      }
    }

    private void completed(Feeds.LivePage p, Throwable e) {
      boolean more = false;
      try {
        more = e == null ? delivered(p) : failed(e);
      } catch (RuntimeException unexpected) {
        log.error("a live-query stream failed unexpectedly: {}", SafeErrors.describe(unexpected));
        end(ErrorCode.INTERNAL, "internal error; see the node's log");
      } finally {
        finished(more);
      }
    }

    /**
     * Sends what the page holds; whether to read again at once. Every read re-signs the cursor (a
     * fresh expiry), so a page without deltas always has a new one to tell: as progress, at most
     * once a {@link #PROGRESS_GAP_NANOS}.
     */
    private boolean delivered(Feeds.LivePage p) {
      failingSince = 0;
      failures = 0;
      long now = System.nanoTime();
      java.util.List<Stream> refused = carry(p, now);
      for (Stream r : refused) {
        r.close(); // its client left or is too far behind; outside the lead's lock
      }
      // After a read up to the group's front: on at once, into the group's shared read from there.
      // Changes written during the read come with signals of their own: only positions the read
      // left (its limit or byte budget) are read again at once.
      boolean more = p.backlog() || capped || readAgain;
      if (!send(p, now)) {
        close();
        return false;
      }
      return more;
    }

    /**
     * Sends the page's deltas, or progress when the last event is {@link #PROGRESS_GAP_NANOS} old;
     * false when the client refused it.
     */
    private boolean send(Feeds.LivePage p, long now) {
      boolean sent;
      if (!p.deltas().isEmpty()) {
        sent = sink.page(p);
      } else if (now - lastEvent >= PROGRESS_GAP_NANOS) {
        sent = sink.progress(cursor);
      } else {
        return true;
      }
      if (sent) {
        lastEvent = now;
      }
      return sent;
    }

    /**
     * Moves this stream to {@code p}'s end and its riders with it (each gets the page, or progress
     * at most once a {@link #PROGRESS_GAP_NANOS}); returns the riders whose client refused it, no
     * longer riding. Under this stream's lock, so a rider attaches before the page (and gets it) or
     * after (standing where the page ended), and a rider let go reads on from where it stands.
     */
    private java.util.List<Stream> carry(Feeds.LivePage p, long now) {
      java.util.List<Stream> refused = java.util.List.of();
      synchronized (this) {
        cursor = p.cursor();
        at = p.at();
        if (leadsAt != null && (at == null || !leadsAt.equals(at.key()))) {
          unregister(); // riders meet this stream where it now stands at its turn's end
        }
        // A copy: a client's sink could end its stream, and leave this list, from inside a send.
        for (Stream r : riders.toArray(new Stream[0])) {
          boolean kept;
          try {
            kept = r.carried(p, now);
          } catch (RuntimeException e) {
            log.error(
                "a live-query stream's client failed unexpectedly: {}", SafeErrors.describe(e));
            kept = false; // that rider alone is closed, not its lead
          }
          if (!kept) {
            riders.remove(r);
            r.riding = null;
            if (refused.isEmpty()) {
              refused = new java.util.ArrayList<>();
            }
            refused.add(r);
          }
        }
      }
      return refused;
    }

    /** A page this stream's lead read from where both stood; false when this stream is done. */
    private boolean carried(Feeds.LivePage p, long now) {
      if (ended.get()) {
        return false;
      }
      cursor = p.cursor();
      at = p.at();
      lastRead = now;
      return send(p, now);
    }

    /**
     * At the end of a turn with nothing left to read: rides the lead registered where this stream
     * stands (true; its own riders come along), or registers there as the lead (false).
     */
    private boolean settle() {
      Group g = group;
      Feeds.LiveAt here = at;
      if (g == null || here == null) {
        return false;
      }
      String key = here.key();
      for (int tries = 0; tries < 3 && !ended.get(); tries++) {
        Stream lead = g.leads.putIfAbsent(key, this);
        if (lead == null || lead == this) {
          synchronized (this) {
            if (ended.get()) {
              g.leads.remove(key, this); // ended meanwhile: releaseRiders has run, or waits
            } else if (leadsIn != g || !key.equals(leadsAt)) {
              if (leadsAt != null && !(leadsIn == g && key.equals(leadsAt))) {
                leadsIn.leads.remove(leadsAt, this);
              }
              leadsIn = g;
              leadsAt = key;
            }
          }
          return false;
        }
        if (attach(lead, key)) {
          return true;
        }
        if (!ended.get()) {
          g.leads.remove(key, lead); // ended, or moved on since it registered
        }
      }
      return false;
    }

    /** Rides {@code lead}, with this stream's riders, if it still stands at {@code key}. */
    private boolean attach(Stream lead, String key) {
      // This stream's lock, then the lead's: the only place two are held. No cycle: a stream
      // attaches only to the lead registered at its own key, and the leads map holds one per key.
      // Holding this stream's lock keeps it from ending (releaseRiders) and from being attached to
      // while its riders move.
      synchronized (this) {
        if (ended.get()) {
          return false;
        }
        unregister();
        synchronized (lead) {
          if (lead.ended.get()
              || lead.riding != null
              || lead.at == null
              || !key.equals(lead.at.key())) {
            return false;
          }
          riding = lead;
          lead.riders.add(this);
          for (Stream r : riders) {
            r.riding = lead;
            lead.riders.add(r);
          }
        }
        riders.clear();
      }
      if (again.getAndSet(false)) {
        lead.wake(); // a wake of this stream's own between its turn's end and now
      }
      return true;
    }

    /** Takes this stream out of its group's leads. Under this stream's lock. */
    private void unregister() {
      if (leadsAt != null) {
        leadsIn.leads.remove(leadsAt, this);
        leadsIn = null;
        leadsAt = null;
      }
    }

    /**
     * Lets every rider go (this stream ends): each is queued for a turn of its own and reads on
     * from where it stands.
     */
    private void releaseRiders() {
      java.util.List<Stream> freed;
      long signalled = wokenAt.get();
      synchronized (this) {
        unregister();
        if (riders.isEmpty()) {
          return;
        }
        freed = java.util.List.copyOf(riders);
        riders.clear();
        for (Stream r : freed) {
          r.riding = null;
          // The lead's latest signal is theirs: a shared read begun before it is read again after.
          r.wokenAt.accumulateAndGet(signalled, (held, given) -> given - held > 0 ? given : held);
        }
      }
      for (Stream r : freed) {
        if (!r.ended.get()) {
          woken.add(r); // busy while riding: queued for its own turn
        }
      }
      drain();
    }

    /**
     * Ends the stream, or schedules another try after a backoff during which the stream stays busy
     * (signals meanwhile only set {@link #again}); never reads again at once.
     */
    private boolean failed(Throwable raw) {
      Throwable t = raw;
      while ((t instanceof CompletionException || t instanceof ExecutionException)
          && t.getCause() != null) {
        t = t.getCause();
      }
      capped = false;
      // Riders stay through the lead's retries (one read per try, not one per stream, while storage
      // is failing); the lead's end lets them go, and each reads for itself.
      Refusal ends = terminal(t);
      if (ends != null) {
        end(ends.code(), ends.message());
        return false;
      }
      long now = System.nanoTime();
      if (failingSince == 0) {
        failingSince = now;
      }
      failures++;
      if (now - failingSince > settings.retryFor().toNanos()) {
        end(
            ErrorCode.UNAVAILABLE,
            "the live query could not be read for "
                + settings.retryFor().toSeconds()
                + " s; resume with the last event id");
        return false;
      }
      backingOff = true;
      long delay = Math.min(5_000, 100L << Math.min(failures - 1, 6));
      executor.schedule(
          () -> {
            backingOff = false;
            woken.add(this); // still busy: queued behind the others
            drain();
          },
          delay,
          TimeUnit.MILLISECONDS);
      return false;
    }

    /** A read's turn is over: queue it again, leave it busy (backing off), or idle. */
    private void finished(boolean more) {
      if (ended.get()) {
        busy.set(false);
      } else if (backingOff) {
        // stays busy until the backoff timer queues it
      } else if (more || again.getAndSet(false)) {
        woken.add(this); // stays busy: queued behind the others woken meanwhile
      } else if (!(cohorts && settle())) {
        busy.set(false);
        if (again.getAndSet(false)) {
          wake();
        }
      }
      // Drained even without a permit (a stream that took a shared read holds none): it may just
      // have queued itself.
      if (permit.getAndSet(false)) {
        reading.decrementAndGet();
      }
      drain();
    }

    /** Ends the stream with its last event. */
    void end(ErrorCode code, String message) {
      if (ended.compareAndSet(false, true)) {
        sink.end(code, message);
        forget();
      }
    }

    /** Whether this stream rides another's reads now (for tests). */
    boolean rides() {
      return riding != null;
    }

    /** Ends the stream without an event (its client left, or is too far behind). */
    public void close() {
      if (ended.compareAndSet(false, true)) {
        sink.close();
        forget();
      }
    }

    private void forget() {
      if (open.remove(this)) {
        release(principal);
      }
      Stream lead = riding;
      if (lead != null) {
        synchronized (lead) {
          lead.riders.remove(this); // a rider moved on meanwhile is dropped by its next lead
        }
      }
      releaseRiders();
    }
  }

  /**
   * Whether {@code a} stands past {@code b} in some partition (false for cursors of different
   * partition counts).
   */
  static boolean ahead(Feeds.LiveAt a, Feeds.LiveAt b) {
    long[] x = a.positions();
    long[] y = b.positions();
    if (x.length != y.length) {
      return false;
    }
    for (int i = 0; i < x.length; i++) {
      if (x[i] > y[i]) {
        return true;
      }
    }
    return false;
  }

  /** Streams that read alike: one principal at one policy epoch, one query, one page size. */
  private record GroupKey(
      String principal, long policyEpoch, String query, int limit, long maxBytes) {}

  /** A group's read from the cursor key {@code from}, started by {@code owner}. */
  private static final class Flight {
    final String from;
    final long started;
    final Stream owner;
    final CompletableFuture<Feeds.LivePage> page = new CompletableFuture<>();

    /** When it completed successfully (0 until then); written under the group's lock. */
    long completed;

    Flight(String from, long started, Stream owner) {
      this.from = from;
      this.started = started;
      this.owner = owner;
    }
  }

  /**
   * How long a completed read may be taken by streams still behind it: a page older than this was
   * checked against row visibility and policies that may have changed since, so a stream behind
   * reads for itself (and meets the fence) instead.
   */
  static final long KEPT_NANOS = TimeUnit.SECONDS.toNanos(1);

  /** Completed reads a group keeps for its streams still behind them. */
  static final int KEPT_READS = 4;

  /**
   * The reads of one group's streams to every tail, by where they started: a stream standing there
   * takes the read's page rather than reading (and reads again after it when the read began before
   * the stream's latest signal; so a wake costs each group one read, not one per stream), and a
   * stream elsewhere first reads up to the group's front (where the latest such read ended), then
   * joins. Holds the reads in flight and the last {@link #KEPT_READS} completed.
   */
  static final class Group {
    private final java.util.LinkedHashMap<String, Flight> flights = new java.util.LinkedHashMap<>();

    /** Idle streams leading the others standing at a key: they ride it instead of reading. */
    final Map<String, Stream> leads = new ConcurrentHashMap<>();

    private Feeds.LiveAt front;
    volatile long used = System.nanoTime();

    synchronized Flight read(String from) {
      Flight f = flights.get(from);
      if (f != null && f.completed != 0 && System.nanoTime() - f.completed > KEPT_NANOS) {
        flights.remove(from, f);
        return null;
      }
      return f;
    }

    synchronized Feeds.LiveAt front() {
      return front;
    }

    /** The read from {@code from}: one in flight or kept, else a new one {@code owner} runs. */
    synchronized Flight start(String from, Stream owner) {
      Flight existing = read(from);
      if (existing != null) {
        return existing;
      }
      Flight f = new Flight(from, System.nanoTime(), owner);
      flights.put(from, f);
      int done = 0;
      for (Flight kept : flights.values()) {
        done += kept.page.isDone() ? 1 : 0;
      }
      var it = flights.values().iterator();
      while (done > KEPT_READS && it.hasNext()) {
        if (it.next().page.isDone()) {
          it.remove();
          done--;
        }
      }
      return f;
    }

    /**
     * A read to every tail ended at {@code page}'s cursor: the group's front when it stands at or
     * past the front in every partition (a stream catching up from far behind never moves the front
     * back, which would send the streams at the tail through reads that move nowhere).
     */
    synchronized void advanced(Feeds.LivePage page) {
      if (page.at() != null && (front == null || !ahead(front, page.at()))) {
        front = page.at();
      }
    }

    void finished(Flight f, Feeds.LivePage page, Throwable error) {
      synchronized (this) {
        if (error != null || page.at() == null || page.at().key().equals(f.from)) {
          // Not kept: a failed read, or one that moved nowhere (a stream taking it would stay
          // where it is); the next stream here reads again.
          flights.remove(f.from, f);
        }
        if (error == null) {
          advanced(page);
          f.completed = System.nanoTime();
        }
      }
      if (error != null) {
        f.page.completeExceptionally(error);
      } else {
        f.page.complete(page);
      }
    }
  }

  /** Open streams riding another's reads now (for tests). */
  int riding() {
    int n = 0;
    for (Stream s : open) {
      n += s.riding != null ? 1 : 0;
    }
    return n;
  }

  /** Groups kept on this node now (for tests). */
  int groups() {
    return groups.size();
  }

  /**
   * A read's failure that ends the stream: a refusal that is not retryable, purged history, or an
   * unexpected error; null when retrying may succeed.
   */
  static Refusal terminal(Throwable t) {
    if (t instanceof Feeds.Refused r) {
      return r.code().retryable() ? null : new Refusal(r.code(), r.getMessage());
    }
    if (t instanceof OutboxReader.MissingEntries) {
      return new Refusal(
          ErrorCode.HISTORY_UNAVAILABLE,
          "changes after the cursor were purged; resynchronise from a new snapshot");
    }
    if (t instanceof TimeoutException
        || t instanceof AskTimeoutException
        || t instanceof SQLException) {
      return null;
    }
    log.error("a live-query stream's read failed unexpectedly: {}", SafeErrors.describe(t));
    return new Refusal(ErrorCode.INTERNAL, "internal error; see the node's log");
  }
}
