package io.weir.protocol.cdc;

import java.util.Objects;
import java.util.UUID;

/**
 * Which stream of changes a position belongs to: an id Weir assigns when it creates (or adopts) a
 * replication slot, plus the PostgreSQL server's system identifier and timeline. A recreated slot
 * or a different or promoted server yields a different incarnation, so a checkpoint or watermark
 * taken on one can never be applied to another.
 */
public record SlotIncarnation(UUID id, long systemIdentifier, int timeline) {
  public SlotIncarnation {
    Objects.requireNonNull(id, "id");
  }

  /** Stable text form {@code <uuid>/<system identifier>/<timeline>}, for storage keys. */
  public String key() {
    return id + "/" + Long.toUnsignedString(systemIdentifier) + "/" + timeline;
  }

  /** Parses {@link #key()}; the error names the expected shape, never the input. */
  public static SlotIncarnation parse(String key) {
    String[] parts = key == null ? new String[0] : key.split("/");
    if (parts.length != 3) {
      throw new IllegalArgumentException(
          "slot incarnation must look like <uuid>/<system id>/<timeline>");
    }
    try {
      return new SlotIncarnation(
          UUID.fromString(parts[0]), Long.parseUnsignedLong(parts[1]), Integer.parseInt(parts[2]));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "slot incarnation must look like <uuid>/<system id>/<timeline>");
    }
  }
}
