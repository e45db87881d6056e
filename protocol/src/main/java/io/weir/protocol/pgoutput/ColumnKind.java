package io.weir.protocol.pgoutput;

/** How one column of a tuple is carried on the wire. */
public enum ColumnKind {
  /** SQL NULL ({@code 'n'}). */
  NULL('n'),
  /**
   * An unchanged TOASTed value ({@code 'u'}): the UPDATE did not touch it and the server did not
   * send it. A marker, not a value: leave the stored column as it is.
   */
  UNCHANGED_TOAST('u'),
  /** The type's text output ({@code 't'}). */
  TEXT('t'),
  /** The type's binary send format ({@code 'b'}), sent when the {@code binary} option is on. */
  BINARY('b');

  private final char wireByte;

  ColumnKind(char wireByte) {
    this.wireByte = wireByte;
  }

  /** The byte that marks this kind on the wire. */
  public char wireByte() {
    return wireByte;
  }

  /** Whether the column carries bytes: {@link #TEXT} or {@link #BINARY}. */
  public boolean hasData() {
    return this == TEXT || this == BINARY;
  }
}
