package io.weir.protocol.token;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Signs and verifies Weir's opaque tokens (batch tokens, change cursors, replay tokens) with
 * HMAC-SHA256 under the cluster's keys.
 *
 * <p>A token is {@code base64url(payload) "." base64url(mac)} without padding, and only that exact
 * spelling verifies: padding or a last character with unused bits set is refused as malformed, so
 * one token has one text. The payload is a canonical binary encoding: a format byte, the key id,
 * the {@link Kind} tag, the expiry time and the kind's fields in a fixed order; the MAC covers all
 * of it, so a token of one kind can never pass as another, and no field can be changed, dropped or
 * appended. Verification parses the payload strictly (nothing may follow the last field) after the
 * MAC matched, compared in constant time.
 *
 * <p>Keys: the cluster's keys by key id (kept in PostgreSQL, shared by every node); tokens are
 * signed with the active key and verified with any key the signer holds, so a rotation keeps
 * earlier tokens valid until their key is retired. Keys retired by a restore from a backup
 * ("fenced" keys) still check a token's MAC, so a genuine token issued before the restore is told
 * apart ({@link Failure#INVALIDATED_BY_RESTORE}) from a forged one. Error messages never quote a
 * token or a field value, and no key material appears in {@link #toString()}.
 */
public final class TokenSigner {
  private static final byte FORMAT = 1;
  private static final Base64.Encoder ENCODER = Base64.getUrlEncoder().withoutPadding();
  private static final Base64.Decoder DECODER = Base64.getUrlDecoder();

  /** Tokens longer than this are refused before any decoding. */
  public static final int MAX_TOKEN_LENGTH = 16384;

  private static final int MIN_KEY_BYTES = 32;

  /** What a token is for; part of the signed bytes. */
  public enum Kind {
    BATCH(1),
    CURSOR(2),
    REPLAY(3);

    final int tag;

    Kind(int tag) {
      this.tag = tag;
    }
  }

  /** Why a token was refused. */
  public enum Failure {
    /** Not a token of this format (truncated, bad encoding, trailing bytes). */
    MALFORMED,
    /** The MAC does not match: forged or tampered with. */
    BAD_SIGNATURE,
    /** Signed with a key id this cluster does not know (or no longer does). */
    UNKNOWN_KEY,
    /** A valid token of another kind. */
    WRONG_KIND,
    /** Past its expiry time. */
    EXPIRED,
    /**
     * Genuine (its MAC matches), but signed with a key that a restore from a backup retired: it was
     * issued before the cluster's state was rewound and must not be used against it.
     */
    INVALIDATED_BY_RESTORE
  }

  /** A refused token; the message names the reason only. */
  public static final class InvalidToken extends Exception {
    private final Failure failure;

    public InvalidToken(Failure failure, String message) {
      super(message, null, false, false);
      this.failure = failure;
    }

    public Failure failure() {
      return failure;
    }
  }

  private final String activeKeyId;
  private final Map<String, byte[]> keys;
  private final Map<String, byte[]> fenced;

  /**
   * @param activeKeyId the key new tokens are signed with; must be among {@code keys}
   * @param keys every key whose tokens verify, by key id (at least 32 bytes each); never logged
   */
  public TokenSigner(String activeKeyId, Map<String, byte[]> keys) {
    this(activeKeyId, keys, Map.of());
  }

  /**
   * @param activeKeyId the key new tokens are signed with; must be among {@code keys}
   * @param keys every key whose tokens verify, by key id (at least 32 bytes each); never logged
   * @param fenced keys retired by a restore from a backup: their tokens are refused with {@link
   *     Failure#INVALIDATED_BY_RESTORE} once their MAC matched; disjoint from {@code keys}
   */
  public TokenSigner(String activeKeyId, Map<String, byte[]> keys, Map<String, byte[]> fenced) {
    validKeyId(activeKeyId);
    Map<String, byte[]> k = checked(keys);
    if (!k.containsKey(activeKeyId)) {
      throw new IllegalArgumentException("the active key is not among the keys");
    }
    Map<String, byte[]> f = checked(fenced);
    if (f.keySet().stream().anyMatch(k::containsKey)) {
      throw new IllegalArgumentException("a key cannot both verify and be fenced by a restore");
    }
    this.activeKeyId = activeKeyId;
    this.keys = Map.copyOf(k);
    this.fenced = Map.copyOf(f);
  }

  private static Map<String, byte[]> checked(Map<String, byte[]> keys) {
    Map<String, byte[]> k = new LinkedHashMap<>();
    keys.forEach(
        (id, key) -> {
          validKeyId(id);
          if (key == null || key.length < MIN_KEY_BYTES) {
            throw new IllegalArgumentException(
                "token keys have at least " + MIN_KEY_BYTES + " bytes");
          }
          k.put(id, key.clone());
        });
    return k;
  }

  /** A signer with one key. */
  public static TokenSigner of(String keyId, byte[] key) {
    return new TokenSigner(keyId, Map.of(keyId, key));
  }

  public String activeKeyId() {
    return activeKeyId;
  }

  private static void validKeyId(String id) {
    if (id == null || !id.matches("[A-Za-z0-9_-]{1,32}")) {
      throw new IllegalArgumentException("key ids are 1 to 32 of A-Z a-z 0-9 _ -");
    }
  }

  /** Writes a kind's fields into the signed payload, in a fixed order. */
  @FunctionalInterface
  public interface Fields {
    void write(DataOutputStream out) throws IOException;
  }

  /** Reads a kind's fields back, in the order they were written. */
  @FunctionalInterface
  public interface Reader<T> {
    T read(DataInputStream in) throws IOException;
  }

  /** A signed token of {@code kind} that expires at {@code expiresAtMillis}. */
  public String sign(Kind kind, long expiresAtMillis, Fields fields) {
    try {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream(128);
      DataOutputStream out = new DataOutputStream(bytes);
      out.writeByte(FORMAT);
      out.writeUTF(activeKeyId);
      out.writeByte(kind.tag);
      out.writeLong(expiresAtMillis);
      fields.write(out);
      out.flush();
      byte[] payload = bytes.toByteArray();
      byte[] mac = mac(keys.get(activeKeyId), payload);
      String token = ENCODER.encodeToString(payload) + "." + ENCODER.encodeToString(mac);
      if (token.length() > MAX_TOKEN_LENGTH) {
        throw new IllegalArgumentException("a token's fields are too long");
      }
      return token;
    } catch (IOException e) {
      throw new IllegalStateException("cannot encode a token", e);
    }
  }

  /**
   * Verifies {@code token} as a token of {@code kind} valid at {@code nowMillis} and reads its
   * fields.
   *
   * @throws InvalidToken when it is malformed, forged, tampered with, signed by an unknown key, of
   *     another kind, issued before a restore from a backup ({@link
   *     Failure#INVALIDATED_BY_RESTORE}, checked before the expiry) or expired
   */
  public <T> T verify(String token, Kind kind, long nowMillis, Reader<T> reader)
      throws InvalidToken {
    if (token == null || token.isEmpty() || token.length() > MAX_TOKEN_LENGTH) {
      throw new InvalidToken(Failure.MALFORMED, "the token is empty or too long");
    }
    int dot = token.indexOf('.');
    if (dot <= 0 || dot != token.lastIndexOf('.')) {
      throw new InvalidToken(Failure.MALFORMED, "the token is not in Weir's token format");
    }
    byte[] payload = decodeCanonical(token.substring(0, dot));
    byte[] mac = decodeCanonical(token.substring(dot + 1));
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(payload));
    String keyId;
    try {
      if (in.readByte() != FORMAT) {
        throw new InvalidToken(Failure.MALFORMED, "the token has an unknown format version");
      }
      keyId = in.readUTF();
    } catch (IOException e) {
      throw new InvalidToken(Failure.MALFORMED, "the token is truncated");
    }
    byte[] key = keys.get(keyId);
    boolean fencedKey = false;
    if (key == null) {
      key = fenced.get(keyId);
      fencedKey = key != null;
    }
    if (key == null) {
      throw new InvalidToken(
          Failure.UNKNOWN_KEY, "the token was signed with a key this cluster does not accept");
    }
    if (!MessageDigest.isEqual(mac(key, payload), mac)) {
      throw new InvalidToken(Failure.BAD_SIGNATURE, "the token's signature does not match");
    }
    try {
      int tag = in.readUnsignedByte();
      if (tag != kind.tag) {
        throw new InvalidToken(
            Failure.WRONG_KIND,
            "the token is not a " + kind.name().toLowerCase(Locale.ROOT) + " token");
      }
      if (fencedKey) {
        throw new InvalidToken(
            Failure.INVALIDATED_BY_RESTORE,
            "the token was issued before the cluster was restored from a backup");
      }
      long expires = in.readLong();
      if (nowMillis >= expires) {
        throw new InvalidToken(Failure.EXPIRED, "the token has expired");
      }
      T value = reader.read(in);
      if (in.available() > 0) {
        throw new InvalidToken(Failure.MALFORMED, "the token has trailing bytes");
      }
      return value;
    } catch (IOException e) {
      throw new InvalidToken(Failure.MALFORMED, "the token is truncated");
    }
  }

  /**
   * Decodes one segment of a token: canonical unpadded base64url, exactly as {@link #sign} writes
   * it, and nothing else. The JDK's decoder also accepts {@code =} padding and a last character
   * whose unused low bits are set, so several spellings would decode to the same bytes; each is
   * refused as {@link Failure#MALFORMED}.
   */
  private static byte[] decodeCanonical(String segment) throws InvalidToken {
    int n = segment.length();
    if (n == 0 || n % 4 == 1) {
      throw new InvalidToken(Failure.MALFORMED, "the token is not valid base64url");
    }
    for (int i = 0; i < n; i++) {
      char c = segment.charAt(i);
      if (!((c >= 'A' && c <= 'Z')
          || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9')
          || c == '-'
          || c == '_')) {
        throw new InvalidToken(
            Failure.MALFORMED, "the token is not unpadded base64url (A-Z a-z 0-9 - _)");
      }
    }
    byte[] bytes;
    try {
      bytes = DECODER.decode(segment);
    } catch (IllegalArgumentException e) {
      throw new InvalidToken(Failure.MALFORMED, "the token is not valid base64url");
    }
    if (!ENCODER.encodeToString(bytes).equals(segment)) {
      throw new InvalidToken(Failure.MALFORMED, "the token is not canonical base64url");
    }
    return bytes;
  }

  private static byte[] mac(byte[] key, byte[] data) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      return mac.doFinal(data);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is required of every JVM", e);
    }
  }

  /** No key material. */
  @Override
  public String toString() {
    return "TokenSigner[active="
        + activeKeyId
        + ", keys="
        + keys.size()
        + ", fenced="
        + fenced.size()
        + "]";
  }
}
