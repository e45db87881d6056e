package io.weir.protocol.pgoutput;

import java.util.Optional;

/** A relation's {@code REPLICA IDENTITY} setting: which old values UPDATE and DELETE carry. */
public enum ReplicaIdentity {
  /** The primary key ({@code 'd'}). */
  DEFAULT('d'),
  /** Nothing ({@code 'n'}). */
  NOTHING('n'),
  /** The whole old row ({@code 'f'}). */
  FULL('f'),
  /** The columns of a chosen unique index ({@code 'i'}). */
  INDEX('i');

  private final char wireByte;

  ReplicaIdentity(char wireByte) {
    this.wireByte = wireByte;
  }

  /** The byte that marks this setting on the wire. */
  public char wireByte() {
    return wireByte;
  }

  /** The setting for a wire byte, or empty if there is none. */
  public static Optional<ReplicaIdentity> forWireByte(char wireByte) {
    return switch (wireByte) {
      case 'd' -> Optional.of(DEFAULT);
      case 'n' -> Optional.of(NOTHING);
      case 'f' -> Optional.of(FULL);
      case 'i' -> Optional.of(INDEX);
      default -> Optional.empty();
    };
  }
}
