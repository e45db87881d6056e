package io.weir.persistence;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

/**
 * TLS towards a PostgreSQL server ({@code weir.postgres.tls}, or a pipeline's {@code source.tls}):
 * pgjdbc's {@code sslmode}, {@code sslrootcert} and, for client-certificate authentication, {@code
 * sslcert} / {@code sslkey} / {@code sslpassword}. Applied as connection properties to every
 * connection Weir opens to that server (its pools, the journal's pool, CDC source and replication
 * connections).
 *
 * @param mode one of {@link #MODES}, or null: pgjdbc's default ({@code prefer}) or the URL's own
 *     {@code sslmode}
 * @param rootCert PEM file of the certificate authorities the server's certificate must chain to
 * @param keyPassword secret; never part of {@link #toString()}
 */
public record PostgresTls(String mode, Path rootCert, Path cert, Path key, String keyPassword) {

  /** pgjdbc's (and libpq's) sslmode values. */
  public static final List<String> MODES =
      List.of("disable", "allow", "prefer", "require", "verify-ca", "verify-full");

  /** No TLS settings: the URL's parameters and pgjdbc's defaults decide. */
  public static final PostgresTls NONE = new PostgresTls(null, null, null, null, null);

  /**
   * URL parameters that would override these settings: pgjdbc lets the URL win over connection
   * properties, so a URL carrying them next to {@code tls.mode} is refused rather than silently
   * weakening (or changing) what the settings ask for.
   */
  private static final List<String> URL_PARAMETERS =
      List.of(
          "ssl",
          "sslmode",
          "sslrootcert",
          "sslcert",
          "sslkey",
          "sslpassword",
          "sslfactory",
          "sslfactoryarg",
          "sslhostnameverifier",
          "sslpasswordcallback",
          "sslnegotiation");

  /**
   * Reads {@code <prefix>.mode|root-cert|cert|key|key-password} and checks the files: they must be
   * readable, the root certificates must parse. Errors name the key (and its environment variable
   * from {@code envNames}), never a value.
   */
  public static PostgresTls create(ConfigValues v, String prefix) {
    String mode = blankToNull(v.optionalString(prefix + ".mode"));
    Path rootCert = file(v, prefix + ".root-cert");
    Path cert = file(v, prefix + ".cert");
    Path key = file(v, prefix + ".key");
    String keyPassword = v.optionalString(prefix + ".key-password");
    keyPassword = keyPassword == null || keyPassword.isEmpty() ? null : keyPassword;
    boolean anyFile = rootCert != null || cert != null || key != null || keyPassword != null;
    if (mode == null) {
      if (anyFile) {
        throw new SettingsException(
            prefix + ".mode",
            "is required when certificate files are set: one of "
                + String.join(", ", MODES)
                + v.envHintOf(prefix + ".mode"));
      }
      return NONE;
    }
    if (!MODES.contains(mode.toLowerCase(Locale.ROOT))) {
      throw new SettingsException(
          prefix + ".mode",
          "must be one of " + String.join(", ", MODES) + v.envHintOf(prefix + ".mode"));
    }
    mode = mode.toLowerCase(Locale.ROOT);
    if (mode.startsWith("verify-") && rootCert == null) {
      throw new SettingsException(
          prefix + ".root-cert",
          "is required with mode "
              + mode
              + ": a PEM file of the certificate authorities to trust"
              + v.envHintOf(prefix + ".root-cert"));
    }
    if ((cert == null) != (key == null)) {
      String missing = cert == null ? prefix + ".cert" : prefix + ".key";
      throw new SettingsException(
          missing,
          "is required with "
              + (cert == null ? prefix + ".key" : prefix + ".cert")
              + ": a client certificate and its key go together"
              + v.envHintOf(missing));
    }
    if (keyPassword != null && key == null) {
      throw new SettingsException(
          prefix + ".key",
          "is required when " + prefix + ".key-password is set" + v.envHintOf(prefix + ".key"));
    }
    if (mode.equals("disable") && anyFile) {
      throw new SettingsException(prefix + ".mode", "is disable, but certificate files are set");
    }
    if (rootCert != null) {
      checkCertificates(prefix + ".root-cert", rootCert);
    }
    if (cert != null) {
      checkCertificates(prefix + ".cert", cert);
    }
    return new PostgresTls(mode, rootCert, cert, key, keyPassword);
  }

  /** True when these settings ask for something (a mode is set). */
  public boolean isSet() {
    return mode != null;
  }

  /** True when the server's certificate is checked (verify-ca, verify-full). */
  public boolean verifiesServer() {
    return mode != null && mode.startsWith("verify-");
  }

  /** pgjdbc connection properties; empty when nothing is set. */
  public Map<String, String> jdbcProperties() {
    Map<String, String> out = new LinkedHashMap<>();
    if (mode == null) {
      return out;
    }
    out.put("sslmode", mode);
    if (rootCert != null) {
      out.put("sslrootcert", rootCert.toString());
    }
    if (cert != null) {
      out.put("sslcert", cert.toString());
      out.put("sslkey", key.toString());
    }
    if (keyPassword != null) {
      out.put("sslpassword", keyPassword);
    }
    return out;
  }

  /** Adds {@link #jdbcProperties()} to {@code props}. */
  public void applyTo(Properties props) {
    jdbcProperties().forEach(props::setProperty);
  }

  /**
   * Refuses a JDBC URL that carries TLS parameters of its own while these settings are set (the
   * URL's would win). {@code urlKey} names the URL's setting in the error.
   */
  public void checkUrl(String urlKey, String url) {
    if (mode == null || url == null) {
      return;
    }
    int q = url.indexOf('?');
    if (q < 0) {
      return;
    }
    for (String pair : url.substring(q + 1).split("&")) {
      String name = pair.contains("=") ? pair.substring(0, pair.indexOf('=')) : pair;
      if (URL_PARAMETERS.contains(name.toLowerCase(Locale.ROOT))) {
        throw new SettingsException(
            urlKey,
            "must not carry TLS parameters ("
                + String.join(", ", URL_PARAMETERS)
                + ") when the tls settings are used: set them in one place");
      }
    }
  }

  private static Path file(ConfigValues v, String key) {
    String value = blankToNull(v.optionalString(key));
    if (value == null) {
      return null;
    }
    Path p;
    try {
      p = Path.of(value);
    } catch (InvalidPathException e) {
      throw new SettingsException(key, "must be a file path" + v.envHintOf(key));
    }
    if (!Files.isRegularFile(p) || !Files.isReadable(p)) {
      throw new SettingsException(
          key, "names a file that is missing or not readable" + v.envHintOf(key));
    }
    return p;
  }

  private static void checkCertificates(String key, Path file) {
    try (InputStream in = Files.newInputStream(file)) {
      if (CertificateFactory.getInstance("X.509").generateCertificates(in).isEmpty()) {
        throw new SettingsException(
            key, "holds no certificate: expected PEM (-----BEGIN CERTIFICATE-----)");
      }
    } catch (CertificateException e) {
      throw new SettingsException(key, "is not a PEM certificate file");
    } catch (IOException e) {
      throw new SettingsException(key, "cannot be read");
    }
  }

  private static String blankToNull(String s) {
    return s == null || s.isBlank() ? null : s.trim();
  }

  @Override
  public String toString() {
    if (mode == null) {
      return "PostgresTls[unset]";
    }
    return "PostgresTls[mode="
        + mode
        + ", rootCert="
        + rootCert
        + ", cert="
        + cert
        + ", key="
        + key
        + ", keyPassword="
        + (keyPassword == null ? "none" : "<hidden>")
        + "]";
  }
}
