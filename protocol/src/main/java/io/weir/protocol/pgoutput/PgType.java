package io.weir.protocol.pgoutput;

/**
 * The PostgreSQL types whose values {@link PgValues} converts to Java objects, by type OID. Every
 * other type is {@link #OTHER}.
 *
 * <p>Each constant's Javadoc names the Java class of {@link PgValue#value()} for it. Where
 * PostgreSQL has values Java's class cannot hold (numeric {@code NaN} and the infinities, {@code
 * infinity} dates and timestamps) the value is a {@link PgSpecial} instead.
 */
public enum PgType {
  /** {@link Boolean}. */
  BOOL(16),
  /** {@code byte[]}. */
  BYTEA(17),
  /** {@link String}. */
  NAME(19),
  /** {@link Long}. */
  INT8(20),
  /** {@link Short}. */
  INT2(21),
  /** {@link Integer}. */
  INT4(23),
  /** {@link String}. */
  TEXT(25),
  /** {@link String}: the JSON text as PostgreSQL stored it. */
  JSON(114),
  /** {@link Float}, including NaN and the infinities. */
  FLOAT4(700),
  /** {@link Double}, including NaN and the infinities. */
  FLOAT8(701),
  /** {@link String}, with the padding PostgreSQL keeps. */
  BPCHAR(1042),
  /** {@link String}. */
  VARCHAR(1043),
  /**
   * {@link java.time.LocalDate} (BC years as ISO years: 1 BC is year 0), or {@link
   * PgSpecial#INFINITY} / {@link PgSpecial#NEGATIVE_INFINITY}.
   */
  DATE(1082),
  /** {@code LocalDateTime}, or an infinity {@link PgSpecial}. */
  TIMESTAMP(1114),
  /**
   * {@link java.time.OffsetDateTime} with the offset of the text form (UTC for binary columns), or
   * an infinity {@link PgSpecial}.
   */
  TIMESTAMPTZ(1184),
  /** {@code BigDecimal}, or any {@link PgSpecial}. */
  NUMERIC(1700),
  /** {@code UUID}. */
  UUID(2950),
  /** {@link String}: the JSON text PostgreSQL prints for the jsonb value. */
  JSONB(3802),
  /**
   * Any other type: the text form as a {@link String} for text columns, the send format as a {@code
   * byte[]} for binary columns. {@link PgValue#typeOid()} names the actual type.
   */
  OTHER(0);

  private final int oid;

  PgType(int oid) {
    this.oid = oid;
  }

  /** The built-in type OID, or 0 (no type) for {@link #OTHER}. */
  public long oid() {
    return oid;
  }

  /** The constant for a type OID; {@link #OTHER} for any OID not listed. */
  public static PgType forOid(long oid) {
    if (oid < 0 || oid > Integer.MAX_VALUE) {
      return OTHER;
    }
    return switch ((int) oid) {
      case 16 -> BOOL;
      case 17 -> BYTEA;
      case 19 -> NAME;
      case 20 -> INT8;
      case 21 -> INT2;
      case 23 -> INT4;
      case 25 -> TEXT;
      case 114 -> JSON;
      case 700 -> FLOAT4;
      case 701 -> FLOAT8;
      case 1042 -> BPCHAR;
      case 1043 -> VARCHAR;
      case 1082 -> DATE;
      case 1114 -> TIMESTAMP;
      case 1184 -> TIMESTAMPTZ;
      case 1700 -> NUMERIC;
      case 2950 -> UUID;
      case 3802 -> JSONB;
      default -> OTHER;
    };
  }
}
