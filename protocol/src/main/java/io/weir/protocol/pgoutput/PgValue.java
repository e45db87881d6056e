package io.weir.protocol.pgoutput;

import java.util.Arrays;
import java.util.Objects;
import java.util.Optional;

/**
 * One converted, non-null column value with its PostgreSQL type.
 *
 * <p>{@link #value()} is the Java object {@link PgType} documents for {@link #type()}. A {@code
 * byte[]} value is copied on the way in and out, so a {@code PgValue} is immutable. {@link
 * #toString()} prints the type only, never the value: assume every value is personal data or a
 * secret.
 */
public final class PgValue {

  private final PgType type;
  private final long typeOid;
  private final Object value;

  PgValue(PgType type, long typeOid, Object value) {
    this.type = type;
    this.typeOid = typeOid;
    this.value = value;
  }

  /** The converted type family; {@link PgType#OTHER} for types without a conversion. */
  public PgType type() {
    return type;
  }

  /** The column's type OID as the relation declared it. */
  public long typeOid() {
    return typeOid;
  }

  /** The value, of the class {@link PgType} documents for {@link #type()}. */
  public Object value() {
    return value instanceof byte[] bytes ? bytes.clone() : value;
  }

  /**
   * The value as {@code javaType}.
   *
   * @throws IllegalStateException if the value is of another class, e.g. a {@link PgSpecial} where
   *     a {@link java.math.BigDecimal} was asked for
   */
  public <T> T as(Class<T> javaType) {
    if (!javaType.isInstance(value)) {
      throw new IllegalStateException(
          "a "
              + type
              + " value is a "
              + value.getClass().getSimpleName()
              + ", not a "
              + javaType.getSimpleName());
    }
    return javaType.cast(value());
  }

  /** Whether the value is a {@link PgSpecial} (NaN or an infinity). */
  public boolean isSpecial() {
    return value instanceof PgSpecial;
  }

  /** The special value, if the value is one. */
  public Optional<PgSpecial> special() {
    return value instanceof PgSpecial special ? Optional.of(special) : Optional.empty();
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof PgValue that
        && type == that.type
        && typeOid == that.typeOid
        && Objects.deepEquals(value, that.value);
  }

  @Override
  public int hashCode() {
    int valueHash = value instanceof byte[] bytes ? Arrays.hashCode(bytes) : value.hashCode();
    return Objects.hash(type, typeOid, valueHash);
  }

  /** The type and Java class, never the value. */
  @Override
  public String toString() {
    return String.format(
        "PgValue[type=%s, oid=%s, class=%s]", type, typeOid, value.getClass().getSimpleName());
  }
}
