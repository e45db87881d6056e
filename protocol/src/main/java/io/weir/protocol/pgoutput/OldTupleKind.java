package io.weir.protocol.pgoutput;

/** Which old values an UPDATE or DELETE carries, as the tuple marker before them says. */
public enum OldTupleKind {
  /** No old values: an UPDATE that changed no replica identity column, under that identity. */
  NONE,
  /**
   * The old replica identity columns ({@code 'K'}); the other columns are {@link ColumnKind#NULL}.
   */
  KEY,
  /** The whole old row ({@code 'O'}), under {@link ReplicaIdentity#FULL}. */
  FULL
}
