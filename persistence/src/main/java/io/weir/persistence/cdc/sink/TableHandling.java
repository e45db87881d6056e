package io.weir.persistence.cdc.sink;

import java.util.Locale;

/** How a pipeline's sink handles one published table ({@code weir ctl pipelines check}). */
public enum TableHandling {
  /** Rows are found by the target's primary key. */
  BY_PRIMARY_KEY,
  /** Rows are found by the target's replica identity index. */
  BY_IDENTITY_INDEX,
  /**
   * The target has no key: rows are found by their whole old image (source REPLICA IDENTITY FULL).
   */
  BY_FULL_IMAGE,
  /**
   * The target has no key and the publication sends only inserts (and truncates): plain inserts.
   */
  INSERTS_ONLY,
  /** Rows become documents whose id is taken from the named columns (partition sink). */
  BY_DOCUMENT_ID,
  /** The sink takes every change as the stream delivers it (file sink, custom sinks). */
  AS_DELIVERED,
  /** The sink would halt at this table's first change of a refused kind; the reason says why. */
  REFUSED;

  /** Wire form: lower case, hyphenated, e.g. {@code by-full-image}. */
  public String wire() {
    return name().toLowerCase(Locale.ROOT).replace('_', '-');
  }
}
