package io.weir.persistence.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.Key;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Certificates made at test time, with the JDK's own {@code keytool} (no openssl): a certificate
 * authority, and leaf certificates it signs for nodes and servers (EC P-256, serverAuth and
 * clientAuth, subject alternative names as asked). Every file lands in one folder; every store's
 * and key's password is {@link #PASSWORD}.
 *
 * <p>keytool makes the key pairs and signs; installing the signed chain, PEM files and trust stores
 * are done here with the {@link KeyStore} API (a PKCS12 {@code setCertificateEntry} is a trusted
 * certificate entry, as {@code keytool -importcert} would make).
 */
public final class TestCertificates {
  /** Password of every store and key made here. */
  public static final String PASSWORD = "test-store-password";

  private final Path dir;

  private TestCertificates(Path dir) {
    this.dir = dir;
  }

  /** Files go to {@code dir} (created if missing). */
  public static TestCertificates in(Path dir) {
    try {
      Files.createDirectories(dir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new TestCertificates(dir);
  }

  /**
   * A certificate authority.
   *
   * @param keyStore its key (PKCS12, alias {@code ca})
   * @param certificate its certificate (PEM): a PostgreSQL client's root certificate file
   * @param trustStore a PKCS12 trust store holding only its certificate
   */
  public record Authority(String name, Path keyStore, Path certificate, Path trustStore) {}

  /**
   * A leaf certificate signed by an authority.
   *
   * @param keyStore PKCS12 with the private key and the chain (leaf, authority), alias {@code node}
   * @param certificate the leaf certificate (PEM)
   * @param key the private key, unencrypted PKCS#8 PEM (as a PostgreSQL server's ssl_key_file)
   */
  public record Leaf(String name, Path keyStore, Path certificate, Path key) {}

  /** A new authority {@code CN=<name>}, valid for a week. */
  public Authority authority(String name) {
    Path keyStore = dir.resolve(name + "-ca.p12");
    keytool(
        "-genkeypair",
        "-alias",
        "ca",
        "-keyalg",
        "EC",
        "-groupname",
        "secp256r1",
        "-dname",
        "CN=" + name,
        "-ext",
        "bc:c",
        "-ext",
        "ku:c=keyCertSign,cRLSign",
        "-validity",
        "7",
        "-keystore",
        keyStore.toString(),
        "-storetype",
        "PKCS12",
        "-storepass",
        PASSWORD);
    try {
      X509Certificate cert = (X509Certificate) load(keyStore).getCertificate("ca");
      Path pem = dir.resolve(name + "-ca.pem");
      Files.writeString(pem, pem("CERTIFICATE", cert.getEncoded()));
      Path trustStore = dir.resolve(name + "-trust.p12");
      KeyStore trust = KeyStore.getInstance("PKCS12");
      trust.load(null, null);
      trust.setCertificateEntry("ca", cert);
      store(trust, trustStore);
      return new Authority(name, keyStore, pem, trustStore);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * A leaf {@code CN=<name>} signed by {@code ca}, valid for a week, with {@code sans} (e.g. {@code
   * ip:127.0.0.1}).
   */
  public Leaf issue(Authority ca, String name, List<String> sans) {
    return issue(ca, name, sans, null, 7);
  }

  /**
   * As {@link #issue(Authority, String, List)}, valid from {@code startDate} (keytool's syntax,
   * e.g. {@code -10d}; null: now) for {@code validityDays}.
   */
  public Leaf issue(
      Authority ca, String name, List<String> sans, String startDate, int validityDays) {
    Path keyStore = dir.resolve(name + ".p12");
    Path csr = dir.resolve(name + ".csr");
    Path pem = dir.resolve(name + ".pem");
    keytool(
        "-genkeypair",
        "-alias",
        "node",
        "-keyalg",
        "EC",
        "-groupname",
        "secp256r1",
        "-dname",
        "CN=" + name,
        "-keystore",
        keyStore.toString(),
        "-storetype",
        "PKCS12",
        "-storepass",
        PASSWORD);
    keytool(
        "-certreq",
        "-alias",
        "node",
        "-keystore",
        keyStore.toString(),
        "-storepass",
        PASSWORD,
        "-file",
        csr.toString());
    List<String> gencert =
        new ArrayList<>(
            List.of(
                "-gencert",
                "-alias",
                "ca",
                "-keystore",
                ca.keyStore().toString(),
                "-storepass",
                PASSWORD,
                "-infile",
                csr.toString(),
                "-outfile",
                pem.toString(),
                "-rfc",
                "-ext",
                "ku:c=digitalSignature",
                "-ext",
                "eku=serverAuth,clientAuth",
                "-validity",
                Integer.toString(validityDays)));
    if (!sans.isEmpty()) {
      gencert.addAll(List.of("-ext", "san=" + String.join(",", sans)));
    }
    if (startDate != null) {
      gencert.addAll(List.of("-startdate", startDate));
    }
    keytool(gencert.toArray(String[]::new));
    try {
      KeyStore ks = load(keyStore);
      Key key = ks.getKey("node", PASSWORD.toCharArray());
      Certificate leaf;
      try (InputStream in = Files.newInputStream(pem)) {
        leaf = CertificateFactory.getInstance("X.509").generateCertificate(in);
      }
      Certificate root = load(ca.keyStore()).getCertificate("ca");
      ks.setKeyEntry("node", key, PASSWORD.toCharArray(), new Certificate[] {leaf, root});
      store(ks, keyStore);
      Path keyPem = dir.resolve(name + "-key.pem");
      Files.writeString(keyPem, pem("PRIVATE KEY", ((PrivateKey) key).getEncoded()));
      Files.deleteIfExists(csr);
      return new Leaf(name, keyStore, pem, keyPem);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  private static KeyStore load(Path file) throws IOException, GeneralSecurityException {
    KeyStore ks = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(file)) {
      ks.load(in, PASSWORD.toCharArray());
    }
    return ks;
  }

  private static void store(KeyStore ks, Path file) throws IOException, GeneralSecurityException {
    try (OutputStream out = Files.newOutputStream(file)) {
      ks.store(out, PASSWORD.toCharArray());
    }
  }

  private static String pem(String type, byte[] der) {
    return "-----BEGIN "
        + type
        + "-----\n"
        + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der)
        + "\n-----END "
        + type
        + "-----\n";
  }

  /**
   * Runs the JDK's keytool (a short-lived JVM tuned for start-up); fails with its output on error.
   */
  private void keytool(String... args) {
    List<String> cmd =
        new ArrayList<>(
            List.of(
                Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
                "-J-XX:TieredStopAtLevel=1",
                "-J-XX:+UseSerialGC",
                "-J-Xshare:auto"));
    cmd.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException("keytool " + args[0] + " failed: " + out);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while running keytool", e);
    }
  }
}
