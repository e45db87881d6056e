package io.weir.node.tls;

import com.typesafe.config.Config;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.SettingsException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.UnrecoverableKeyException;
import java.security.cert.Certificate;
import java.security.cert.CertificateExpiredException;
import java.security.cert.CertificateNotYetValidException;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;

/**
 * Opens the PKCS12 key and trust stores named by TLS settings and checks what they hold. Every
 * failure is a {@link SettingsException} naming the setting at fault (the file's or the password's
 * key), never a password or a path.
 */
final class KeyStores {
  private KeyStores() {}

  /** The environment variables that set the TLS settings, for error messages. */
  static final Map<String, String> ENV =
      Map.of(
          "weir.http.tls.key-store", "WEIR_HTTP_TLS_KEY_STORE",
          "weir.http.tls.key-store-password", "WEIR_HTTP_TLS_KEY_STORE_PASSWORD",
          "weir.cluster.tls.key-store", "WEIR_CLUSTER_TLS_KEY_STORE",
          "weir.cluster.tls.key-store-password", "WEIR_CLUSTER_TLS_KEY_STORE_PASSWORD",
          "weir.cluster.tls.trust-store", "WEIR_CLUSTER_TLS_TRUST_STORE",
          "weir.cluster.tls.trust-store-password", "WEIR_CLUSTER_TLS_TRUST_STORE_PASSWORD",
          "weir.protocol-gateway.tls.key-store", "WEIR_GATEWAY_TLS_KEY_STORE",
          "weir.protocol-gateway.tls.key-store-password", "WEIR_GATEWAY_TLS_KEY_STORE_PASSWORD",
          "weir.protocol-gateway.tls.trust-store", "WEIR_GATEWAY_TLS_TRUST_STORE",
          "weir.protocol-gateway.tls.trust-store-password",
              "WEIR_GATEWAY_TLS_TRUST_STORE_PASSWORD");

  static String hint(String key) {
    String env = ENV.get(key);
    return env == null ? "" : " (environment variable " + env + ")";
  }

  static ConfigValues values(Config config) {
    return new ConfigValues(config, ENV);
  }

  /** A setting's value as a path, or null when it is empty or absent. */
  static Path path(ConfigValues v, String key) {
    String value = v.optionalString(key);
    if (value == null || value.isBlank()) {
      return null;
    }
    try {
      return Path.of(value.trim());
    } catch (InvalidPathException e) {
      throw new SettingsException(key, "must be a file path" + hint(key));
    }
  }

  /**
   * A password setting: null when absent or empty (passwords are taken as they are, not trimmed).
   */
  static String password(ConfigValues v, String key) {
    String value = v.optionalString(key);
    return value == null || value.isEmpty() ? null : value;
  }

  /** Opens a PKCS12 file. {@code fileKey} and {@code passwordKey} name the settings in errors. */
  static KeyStore load(String fileKey, Path file, String passwordKey, String password) {
    if (!Files.isRegularFile(file) || !Files.isReadable(file)) {
      throw new SettingsException(
          fileKey, "names a file that is missing or not readable" + hint(fileKey));
    }
    try (InputStream in = Files.newInputStream(file)) {
      KeyStore store = KeyStore.getInstance("PKCS12");
      store.load(in, password == null ? null : password.toCharArray());
      return store;
    } catch (IOException e) {
      if (e.getCause() instanceof UnrecoverableKeyException) {
        throw new SettingsException(
            passwordKey, "does not open " + fileKey + " (wrong password)" + hint(passwordKey));
      }
      throw new SettingsException(fileKey, "is not a readable PKCS12 key store" + hint(fileKey));
    } catch (GeneralSecurityException e) {
      throw new SettingsException(fileKey, "is not a readable PKCS12 key store" + hint(fileKey));
    }
  }

  /**
   * Key managers over a key store that holds at least one private key with its certificate, opened
   * with the store's password; each such certificate must be valid now.
   */
  static KeyManager[] keyManagers(
      String fileKey, KeyStore store, String passwordKey, String password) {
    try {
      List<String> keys = new ArrayList<>();
      for (String alias : Collections.list(store.aliases())) {
        if (store.isKeyEntry(alias) && store.getCertificate(alias) != null) {
          keys.add(alias);
        }
      }
      if (keys.isEmpty()) {
        throw new SettingsException(
            fileKey, "holds no private key with a certificate" + hint(fileKey));
      }
      for (String alias : keys) {
        checkValidity(fileKey, store.getCertificate(alias));
      }
      KeyManagerFactory factory =
          KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      factory.init(store, password == null ? new char[0] : password.toCharArray());
      return factory.getKeyManagers();
    } catch (UnrecoverableKeyException e) {
      throw new SettingsException(
          passwordKey,
          "does not open the private key in "
              + fileKey
              + " (the key's password must be the key store's)"
              + hint(passwordKey));
    } catch (GeneralSecurityException e) {
      throw new SettingsException(
          fileKey, "cannot be used as a key store (" + e.getClass().getSimpleName() + ")");
    }
  }

  /** Trust managers over a trust store that holds at least one trusted certificate. */
  static TrustManager[] trustManagers(String fileKey, KeyStore store) {
    try {
      int trusted = 0;
      for (String alias : Collections.list(store.aliases())) {
        if (store.isCertificateEntry(alias)) {
          trusted++;
        }
      }
      if (trusted == 0) {
        throw new SettingsException(
            fileKey,
            "holds no trusted certificate: import the cluster's CA certificate"
                + " (keytool -importcert -storetype PKCS12)"
                + hint(fileKey));
      }
      TrustManagerFactory factory =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      factory.init(store);
      return factory.getTrustManagers();
    } catch (GeneralSecurityException e) {
      throw new SettingsException(
          fileKey, "cannot be used as a trust store (" + e.getClass().getSimpleName() + ")");
    }
  }

  /** The certificate of the first private key entry, for the start-up log line. */
  static X509Certificate certificate(KeyStore store) {
    try {
      for (String alias : Collections.list(store.aliases())) {
        if (store.isKeyEntry(alias) && store.getCertificate(alias) instanceof X509Certificate c) {
          return c;
        }
      }
      return null;
    } catch (GeneralSecurityException e) {
      return null;
    }
  }

  private static void checkValidity(String fileKey, Certificate certificate) {
    if (!(certificate instanceof X509Certificate x509)) {
      throw new SettingsException(fileKey, "holds a key whose certificate is not X.509");
    }
    try {
      x509.checkValidity();
    } catch (CertificateExpiredException e) {
      throw new SettingsException(
          fileKey, "holds a certificate that expired on " + x509.getNotAfter().toInstant());
    } catch (CertificateNotYetValidException e) {
      throw new SettingsException(
          fileKey,
          "holds a certificate that is valid only from " + x509.getNotBefore().toInstant());
    }
  }
}
