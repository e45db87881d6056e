package io.weir.node.continuous;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.Identifiers;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SettingsException;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * {@code weir.continuous}: limits of continuous queries and the security scopes an administrator
 * configured. A scope maps to a PostgreSQL login role with its own credentials (from the
 * configuration or, with {@code ${?ENV}}, the environment) and its own small pool; queries of the
 * scope run on that login only, so the role's row-level security applies. Errors name keys, never
 * values.
 *
 * @param statementTimeout {@code statement_timeout} of every query a continuous query runs
 * @param maxLimit the largest LIMIT a registration may ask for
 * @param replayRetained events kept per session for resuming an SSE stream by {@code Last-Event-ID}
 * @param subscriberBuffer events buffered per SSE client; a client that falls further behind is
 *     disconnected (it resumes or gets a reset)
 * @param visibilityRetries how often a read is taken again while its snapshot misses a delivered
 *     transaction, {@code visibilityRetryDelay} apart, before the session records a pending repair
 * @param refresh how often a node looks for registrations made on another node and retries pending
 *     repairs
 * @param affectedKeyLimit the most result keys one transaction may affect in a session before the
 *     scoped delta gives way to a full read
 * @param repairEveryTransactions a full read after this many scoped deltas (K)
 * @param repairInterval a full read when the last one is this old and scoped deltas ran since (T)
 * @param maxRegistrationsPerScope the most continuous queries one security scope may hold
 * @param replayTokenTtl how long a replay token (an SSE event id) resumes a stream
 * @param maxAppendBytes the most bytes of event data one transaction may append to a session's log
 *     (an append crosses the cluster in one message: keep it well below the remote frame size)
 * @param followInterval how often a stream served by a node that does not maintain its session
 *     reads the session's journal for new events
 */
public record ContinuousSettings(
    Duration statementTimeout,
    int maxLimit,
    int replayRetained,
    int subscriberBuffer,
    int visibilityRetries,
    Duration visibilityRetryDelay,
    Duration refresh,
    int affectedKeyLimit,
    int repairEveryTransactions,
    Duration repairInterval,
    Duration replayTokenTtl,
    int maxRegistrationsPerScope,
    long maxAppendBytes,
    Duration followInterval,
    Map<String, Scope> scopes) {

  public ContinuousSettings {
    scopes = Map.copyOf(scopes);
  }

  /**
   * One security scope.
   *
   * @param password secret; never part of {@link #toString()}
   */
  public record Scope(String name, String url, String user, String password, int poolSize) {
    @Override
    public String toString() {
      return "Scope[" + name + ", user=" + user + ", password=<hidden>, poolSize=" + poolSize + "]";
    }
  }

  public static ContinuousSettings create(Config config) {
    ConfigValues v = new ConfigValues(config, Map.of());
    String p = "weir.continuous";
    Map<String, Scope> scopes = new TreeMap<>();
    if (config.hasPath(p + ".scopes")) {
      Config all;
      try {
        all = config.getConfig(p + ".scopes");
      } catch (ConfigException e) {
        throw new SettingsException(
            p + ".scopes", "must be an object of scope name -> { user, password, url, pool-size }");
      }
      for (String name : new TreeSet<>(config.getObject(p + ".scopes").keySet())) {
        if (!Identifiers.isValid(name)) {
          throw new SettingsException(
              p + ".scopes", "scope names " + Identifiers.SHAPE.replaceFirst("^must ", "must "));
        }
        String key = p + ".scopes." + name;
        Config c = all.getConfig(name);
        String user = v.requiredString(key + ".user");
        String password = c.hasPath("password") ? c.getString("password") : "";
        String url = c.hasPath("url") ? c.getString("url") : config.getString("weir.postgres.url");
        if (!url.startsWith("jdbc:postgresql:")) {
          throw new SettingsException(
              key + ".url", "must be a JDBC URL starting with jdbc:postgresql:");
        }
        int pool = c.hasPath("pool-size") ? v.positiveInt(key + ".pool-size") : 2;
        scopes.put(name, new Scope(name, url, user, password, pool));
      }
    }
    return new ContinuousSettings(
        v.positiveDuration(p + ".statement-timeout"),
        v.positiveInt(p + ".max-limit"),
        v.positiveInt(p + ".replay-retained"),
        v.positiveInt(p + ".subscriber-buffer"),
        v.positiveInt(p + ".visibility-retries"),
        v.positiveDuration(p + ".visibility-retry-delay"),
        v.positiveDuration(p + ".refresh"),
        v.positiveInt(p + ".affected-key-limit"),
        v.positiveInt(p + ".repair-every-transactions"),
        v.positiveDuration(p + ".repair-interval"),
        v.positiveDuration(p + ".replay-token-ttl"),
        v.positiveInt(p + ".max-registrations-per-scope"),
        v.bytes(p + ".max-append-bytes", 64 * 1024),
        v.positiveDuration(p + ".follow-interval"),
        scopes);
  }

  /**
   * The scope's pool settings: Weir's PostgreSQL settings (TLS, timeouts) with the scope's login.
   */
  static PostgresSettings poolSettings(PostgresSettings weir, Scope scope) {
    return new PostgresSettings(
        scope.url(),
        scope.user(),
        scope.password(),
        weir.schema(),
        scope.poolSize(),
        weir.connectTimeout(),
        weir.probeInterval(),
        weir.minBackoff(),
        weir.maxBackoff(),
        weir.tls());
  }
}
