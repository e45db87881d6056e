package io.weir.protocol.query;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigDecimal;
import java.util.Objects;

/**
 * A scalar in a predicate: JSON null, a boolean, a number or a string. Numbers are held as {@link
 * BigDecimal} without trailing zeros, so {@code 1} and {@code 1.0} are the same literal. Immutable;
 * {@link #toString()} names the type only, never the value.
 */
public final class Literal {
  /** What kind of JSON scalar a literal is. */
  public enum Type {
    NULL,
    BOOLEAN,
    NUMBER,
    STRING
  }

  public static final Literal NULL = new Literal(Type.NULL, null);
  public static final Literal TRUE = new Literal(Type.BOOLEAN, Boolean.TRUE);
  public static final Literal FALSE = new Literal(Type.BOOLEAN, Boolean.FALSE);

  private final Type type;
  private final Object value;
  private final String canonicalJson;

  private Literal(Type type, Object value) {
    this.type = type;
    this.value = value;
    this.canonicalJson = Canonical.literal(type, value);
  }

  public static Literal of(boolean value) {
    return value ? TRUE : FALSE;
  }

  public static Literal of(BigDecimal value) {
    return new Literal(Type.NUMBER, Objects.requireNonNull(value, "value").stripTrailingZeros());
  }

  public static Literal of(String value) {
    return new Literal(Type.STRING, Objects.requireNonNull(value, "value"));
  }

  public Type type() {
    return type;
  }

  public boolean booleanValue() {
    return (Boolean) valueOf(Type.BOOLEAN);
  }

  public BigDecimal numberValue() {
    return (BigDecimal) valueOf(Type.NUMBER);
  }

  public String stringValue() {
    return (String) valueOf(Type.STRING);
  }

  private Object valueOf(Type wanted) {
    if (type != wanted) {
      throw new IllegalStateException("a " + type + " literal is not a " + wanted);
    }
    return value;
  }

  /** Compact JSON for this literal, as in {@link Q1Query#canonicalJson()}. */
  String canonicalJson() {
    return canonicalJson;
  }

  /**
   * Whether a document value equals this literal: numbers numerically, strings, booleans and null
   * by value, never across types.
   */
  boolean equalTo(JsonNode node) {
    return switch (type) {
      case NULL -> node.isNull();
      case BOOLEAN -> node.isBoolean() && node.booleanValue() == (Boolean) value;
      case NUMBER ->
          Eval.isFiniteNumber(node) && node.decimalValue().compareTo((BigDecimal) value) == 0;
      case STRING -> node.isTextual() && node.textValue().equals(value);
    };
  }

  /**
   * Orders a document value against this literal: number with number numerically, string with
   * string by code points; {@link Eval#INCOMPARABLE} otherwise.
   */
  int compareFrom(JsonNode node) {
    if (type == Type.NUMBER && Eval.isFiniteNumber(node)) {
      return Integer.signum(node.decimalValue().compareTo((BigDecimal) value));
    }
    if (type == Type.STRING && node.isTextual()) {
      return Integer.signum(Eval.compareCodePoints(node.textValue(), (String) value));
    }
    return Eval.INCOMPARABLE;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Literal other && canonicalJson.equals(other.canonicalJson);
  }

  @Override
  public int hashCode() {
    return canonicalJson.hashCode();
  }

  /** The type only. */
  @Override
  public String toString() {
    return "Literal[" + type + "]";
  }
}
