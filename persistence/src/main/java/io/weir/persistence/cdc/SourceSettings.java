package io.weir.persistence.cdc;

/**
 * How to reach the PostgreSQL whose changes a pipeline streams.
 *
 * @param password secret; never part of {@link #toString()}
 */
public record SourceSettings(String url, String user, String password) {
  @Override
  public String toString() {
    return "SourceSettings[url=" + url + ", user=" + user + ", password=<hidden>]";
  }
}
