package io.weir.node.gateway;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import io.weir.node.tls.ClusterTls;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.SettingsException;
import java.util.Map;
import java.util.Optional;

/**
 * {@code weir.protocol-gateway}: whether this node opens the protocol gateway's port, where, and
 * with which TLS (ADR 0028).
 *
 * @param enabled off: no gateway port, protocol clients cannot reach this node
 * @param host the address clients reach the gateway on
 * @param port the gateway's remoting port, separate from the cluster port
 * @param maxInFlight requests served at once; more are refused with {@code busy}
 * @param tls mutual TLS on the gateway port; empty: plain TCP
 */
public record GatewaySettings(
    boolean enabled, String host, int port, int maxInFlight, Optional<ClusterTls> tls) {

  static final String ENABLED = "weir.protocol-gateway.enabled";

  private static final Map<String, String> ENV =
      Map.of(
          ENABLED,
          "WEIR_GATEWAY_ENABLED",
          "weir.protocol-gateway.host",
          "WEIR_GATEWAY_HOST",
          "weir.protocol-gateway.port",
          "WEIR_GATEWAY_PORT");

  /** Reads and checks {@code weir.protocol-gateway}; the TLS stores are opened here. */
  public static GatewaySettings create(Config config) {
    ConfigValues v = new ConfigValues(config, ENV);
    boolean enabled;
    try {
      enabled = config.getBoolean(ENABLED);
    } catch (ConfigException e) {
      throw new SettingsException(ENABLED, "must be on or off" + v.envHintOf(ENABLED));
    }
    String host = v.requiredString("weir.protocol-gateway.host");
    int port = v.port("weir.protocol-gateway.port", false);
    int maxInFlight = v.positiveInt("weir.protocol-gateway.max-in-flight");
    Optional<ClusterTls> tls =
        enabled ? ClusterTls.create(config, ClusterTls.GATEWAY) : Optional.empty();
    return new GatewaySettings(enabled, host, port, maxInFlight, tls);
  }
}
