package io.weir.persistence.testing;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * The real PostgreSQL that integration tests run against. It comes from {@code WEIR_TEST_PG_URL}
 * (with {@code WEIR_TEST_PG_USER} / {@code WEIR_TEST_PG_PASSWORD}) when set, as the README's test
 * command does; otherwise this starts the project's private cluster with {@code deploy/bin/pg.sh
 * start}. Each test gets a fresh database of its own from {@link #freshDatabase(String)}.
 */
public final class TestPostgres {
  private static volatile TestPostgres server;

  private final String url;
  private final String user;
  private final String password;

  private TestPostgres(String url, String user, String password) {
    this.url = url;
    this.user = user;
    this.password = password;
  }

  public static TestPostgres server() {
    TestPostgres s = server;
    if (s == null) {
      synchronized (TestPostgres.class) {
        s = server;
        if (s == null) {
          s = server = locate();
        }
      }
    }
    return s;
  }

  /**
   * A PostgreSQL cluster of the caller's own, started by {@code deploy/bin/pg.sh} in {@code home}
   * on ports from {@code portBase}: for tests that change server settings or stop the server. The
   * caller destroys it ({@code pgScript(env, "destroy")} with the same environment).
   */
  public static TestPostgres privateServer(Map<String, String> pgEnv) {
    Map<String, String> env = pgScript(pgEnv, "start");
    return new TestPostgres(
        env.get("WEIR_PG_URL"), env.get("WEIR_PG_USER"), env.get("WEIR_PG_PASSWORD"));
  }

  private static TestPostgres locate() {
    String url = System.getenv("WEIR_TEST_PG_URL");
    if (url != null && !url.isBlank()) {
      return new TestPostgres(
          url, envOr("WEIR_TEST_PG_USER", "weir"), envOr("WEIR_TEST_PG_PASSWORD", ""));
    }
    Map<String, String> env = pgScript(Map.of(), "start");
    return new TestPostgres(
        env.get("WEIR_PG_URL"), env.get("WEIR_PG_USER"), env.get("WEIR_PG_PASSWORD"));
  }

  private static String envOr(String name, String fallback) {
    String v = System.getenv(name);
    return v == null ? fallback : v;
  }

  /**
   * The repository root: the nearest folder above the working directory holding deploy/bin/pg.sh.
   */
  public static Path repoRoot() {
    Path dir = Path.of("").toAbsolutePath();
    while (dir != null && !Files.isRegularFile(dir.resolve("deploy/bin/pg.sh"))) {
      dir = dir.getParent();
    }
    if (dir == null) {
      throw new IllegalStateException("cannot find deploy/bin/pg.sh above the working directory");
    }
    return dir;
  }

  /**
   * Runs {@code deploy/bin/pg.sh <command>} with extra environment (e.g. {@code WEIR_PG_HOME} for a
   * cluster of the test's own) and returns the {@code export} lines it printed as a map.
   */
  public static Map<String, String> pgScript(Map<String, String> extraEnv, String command) {
    try {
      ProcessBuilder pb =
          new ProcessBuilder("bash", repoRoot().resolve("deploy/bin/pg.sh").toString(), command)
              .redirectError(ProcessBuilder.Redirect.INHERIT);
      pb.environment().putAll(extraEnv);
      Process p = pb.start();
      Map<String, String> env = new HashMap<>();
      try (BufferedReader r =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          if (line.startsWith("export ")) {
            int eq = line.indexOf('=');
            String value = line.substring(eq + 1);
            if (value.startsWith("'") && value.endsWith("'")) {
              value = value.substring(1, value.length() - 1);
            }
            env.put(line.substring("export ".length(), eq), value);
          }
        }
      }
      if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException(
            "deploy/bin/pg.sh " + command + " failed; see its output above");
      }
      return env;
    } catch (IOException e) {
      throw new IllegalStateException("cannot run deploy/bin/pg.sh", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while starting PostgreSQL", e);
    }
  }

  public String url() {
    return url;
  }

  public String user() {
    return user;
  }

  public String password() {
    return password;
  }

  /** host:port of the server, from the JDBC URL. */
  public String hostAndPort() {
    String rest = url.substring("jdbc:postgresql://".length());
    return rest.substring(0, rest.indexOf('/'));
  }

  public Connection connect(String database) throws SQLException {
    return DriverManager.getConnection(urlFor(database), user, password);
  }

  public String urlFor(String database) {
    return "jdbc:postgresql://" + hostAndPort() + "/" + database;
  }

  /** Creates an empty database named {@code <prefix>_<random>} and returns its handle. */
  public TestDatabase freshDatabase(String prefix) {
    return freshDatabase(prefix, "");
  }

  /**
   * Like {@link #freshDatabase(String)}, created with {@code options} after its name (a test's own
   * constant, e.g. {@code TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE
   * 'C.UTF-8'} for a database whose default collation is not by code point, as most are).
   */
  public TestDatabase freshDatabase(String prefix, String options) {
    String name =
        (prefix + "_" + UUID.randomUUID().toString().replace("-", "").substring(0, 10))
            .toLowerCase(Locale.ROOT);
    if (!name.matches("[a-z_][a-z0-9_]{0,62}")) {
      throw new IllegalArgumentException("database prefix must be a lower-case identifier");
    }
    try (Connection c = connect("postgres");
        Statement s = c.createStatement()) {
      s.execute("CREATE DATABASE " + name + (options.isEmpty() ? "" : " " + options));
    } catch (SQLException e) {
      throw new IllegalStateException("cannot create a test database", e);
    }
    return new TestDatabase(this, name);
  }

  /** A database of one test. {@link #close()} drops it. */
  public record TestDatabase(TestPostgres server, String name) implements AutoCloseable {
    public String url() {
      return server.urlFor(name);
    }

    public Connection connect() throws SQLException {
      return server.connect(name);
    }

    /** {@code weir.postgres} settings pointing at this database. */
    public Config config() {
      Map<String, Object> m = new HashMap<>();
      m.put("weir.postgres.url", url());
      m.put("weir.postgres.user", server.user());
      m.put("weir.postgres.password", server.password());
      return ConfigFactory.parseMap(m);
    }

    /** Drops the database, after ending its replication connections and dropping its slots. */
    @Override
    public void close() {
      try (Connection c = server.connect("postgres");
          Statement s = c.createStatement()) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
          s.execute(
              "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = '"
                  + name
                  + "' AND active_pid IS NOT NULL");
          try {
            s.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '"
                    + name
                    + "'");
            break;
          } catch (SQLException stillActive) {
            if (System.nanoTime() > deadline) {
              throw stillActive;
            }
            Thread.sleep(200);
          }
        }
        s.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while dropping a test database", e);
      } catch (SQLException e) {
        throw new IllegalStateException("cannot drop test database", e);
      }
    }
  }
}
