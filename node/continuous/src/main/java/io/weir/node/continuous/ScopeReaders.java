package io.weir.node.continuous;

import io.weir.persistence.PostgresSettings;
import io.weir.protocol.ErrorCode;
import java.util.HashMap;
import java.util.Map;

/** One {@link ScopeReader} per configured security scope, made on first use (any thread). */
final class ScopeReaders implements AutoCloseable {
  private final ContinuousSettings settings;
  private final PostgresSettings weir;
  private final Map<String, ScopeReader> readers = new HashMap<>();

  ScopeReaders(ContinuousSettings settings, PostgresSettings weir) {
    this.settings = settings;
    this.weir = weir;
  }

  /** The reader of {@code scope}; {@code unknown-scope} when no such scope is configured. */
  ScopeReader get(String scope) {
    ContinuousSettings.Scope s = settings.scopes().get(scope);
    if (s == null) {
      throw new ContinuousQueryException(
          ErrorCode.UNKNOWN_SCOPE, "no such security scope is configured");
    }
    synchronized (readers) {
      return readers.computeIfAbsent(
          scope, k -> new ScopeReader(s, weir, settings.statementTimeout()));
    }
  }

  @Override
  public void close() {
    synchronized (readers) {
      readers.values().forEach(ScopeReader::close);
      readers.clear();
    }
  }
}
