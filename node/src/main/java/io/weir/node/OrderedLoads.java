package io.weir.node;

import java.sql.Connection;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;

/**
 * A view of rows in PostgreSQL that this node keeps in memory (token keys, principals): each load
 * applies an optional change, takes a ticket and then reads; its result is published only if no
 * load with a later ticket has published already. So a slow scheduled reload can never overwrite
 * what a later change through this node published (a key retired, a principal revoked).
 */
public final class OrderedLoads<T> {
  /** A change committed before the rows are read again. */
  @FunctionalInterface
  public interface Change {
    void apply(Connection c) throws Exception;
  }

  /** Reads the rows into the view's value. */
  @FunctionalInterface
  public interface Loader<T> {
    T load(Connection c) throws Exception;
  }

  private record Loaded<T>(long ticket, T value) {}

  private final DataSource dataSource;
  private final Executor blocking;
  private final Loader<T> loader;
  private final AtomicLong tickets = new AtomicLong();
  private final AtomicReference<Loaded<T>> current;

  /**
   * @param initial the value before the first load (null: none yet)
   */
  public OrderedLoads(DataSource dataSource, Executor blocking, Loader<T> loader, T initial) {
    this.dataSource = dataSource;
    this.blocking = blocking;
    this.loader = loader;
    this.current = new AtomicReference<>(new Loaded<>(0, initial));
  }

  /** The value last published (null before the first load when there is no initial value). */
  public T current() {
    return current.get().value();
  }

  /**
   * Applies {@code change} (null: none), reads the rows and publishes them unless a later load did.
   * The stage holds the value published once this load is done: its own, or the later one.
   */
  public CompletionStage<T> run(Change change) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection()) {
            if (change != null) {
              change.apply(c);
            }
            long ticket = tickets.incrementAndGet();
            Loaded<T> fresh = new Loaded<>(ticket, loader.load(c));
            return current
                .accumulateAndGet(fresh, (old, next) -> old.ticket() > next.ticket() ? old : next)
                .value();
          } catch (RuntimeException e) {
            throw e;
          } catch (Exception e) {
            throw new CompletionException(e);
          }
        },
        blocking);
  }
}
