package io.weir.node.http;

import io.weir.node.NodeView;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Policies;
import io.weir.node.auth.Principals;
import io.weir.node.cdc.PipelineAdmin;
import io.weir.node.cdc.SlotLag;
import io.weir.node.continuous.ContinuousQueries;
import io.weir.node.documents.BatchLimits;
import io.weir.node.documents.Documents;
import io.weir.node.feed.Feeds;
import io.weir.node.feed.LiveStreams;
import io.weir.node.metrics.HttpMetrics;
import io.weir.node.metrics.MetricsSettings;
import io.weir.node.projection.Projections;
import io.weir.node.tokens.TokenKeys;
import io.weir.protocol.http.OutboxSettings;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * What the node's HTTP API serves: every service its routes call, in one place. Only the
 * authenticator and the node view are required; a service left out (null) makes its routes answer
 * 404 {@code not-found} (and, for the policies, leaves every collection unrestricted), so a test
 * builds the API with just what it exercises.
 *
 * @param authenticator resolves bearer tokens to principals
 * @param node cluster membership, readiness and partition counts
 * @param pipelines pipeline operations ({@code /admin/pipelines}, {@code /admin/slots} besides)
 * @param metrics the Prometheus text exposition of the node's meters
 * @param documents the document API and the partitions' outbox operations
 * @param maxDocumentBytes the largest request body a document write accepts
 * @param batchLimits bounds of {@code POST /v1/documents/batch}
 * @param projections projection consumers ({@code /admin/projections})
 * @param tokenKeys the cluster's token-signing keys ({@code /admin/tokens})
 * @param principals the stored principals ({@code /admin/principals})
 * @param policies collection policies ({@code /admin/policies}); none: every collection
 *     unrestricted
 * @param feeds the changes feed and queries ({@code /v1/changes}, {@code /v1/query})
 * @param liveStreams pushed live queries ({@code GET /v1/query/live/stream}); none: 404
 * @param continuous continuous queries ({@code /v1/continuous})
 * @param slotLag the pipelines' replication slots ({@code GET /admin/slots})
 * @param outboxSettings the quota and retention every partition runs under ({@code GET
 *     /admin/outbox/settings})
 * @param httpMetrics times and counts every request
 * @param metricsAccess who may read {@code GET /metrics}
 */
public record ApiServices(
    Authenticator authenticator,
    NodeView node,
    PipelineAdmin pipelines,
    Supplier<String> metrics,
    Documents documents,
    long maxDocumentBytes,
    BatchLimits batchLimits,
    Projections projections,
    TokenKeys tokenKeys,
    Principals principals,
    Policies policies,
    Feeds feeds,
    LiveStreams liveStreams,
    ContinuousQueries continuous,
    SlotLag slotLag,
    OutboxSettings outboxSettings,
    HttpMetrics httpMetrics,
    MetricsSettings metricsAccess) {
  public ApiServices {
    Objects.requireNonNull(authenticator, "authenticator");
    Objects.requireNonNull(node, "node");
    Objects.requireNonNull(metricsAccess, "metricsAccess");
  }

  /** Services with only {@code authenticator} and {@code node}; add the rest with the builder. */
  public static Builder builder(Authenticator authenticator, NodeView node) {
    return new Builder(authenticator, node);
  }

  /** Names each service as it is added; {@link #build} makes the record. */
  public static final class Builder {
    private final Authenticator authenticator;
    private final NodeView node;
    private PipelineAdmin pipelines;
    private Supplier<String> metrics;
    private Documents documents;
    private long maxDocumentBytes;
    private BatchLimits batchLimits = BatchLimits.DEFAULTS;
    private Projections projections;
    private TokenKeys tokenKeys;
    private Principals principals;
    private Policies policies;
    private Feeds feeds;
    private LiveStreams liveStreams;
    private ContinuousQueries continuous;
    private SlotLag slotLag;
    private OutboxSettings outboxSettings;
    private HttpMetrics httpMetrics;
    private MetricsSettings metricsAccess = MetricsSettings.DEFAULTS;

    private Builder(Authenticator authenticator, NodeView node) {
      this.authenticator = authenticator;
      this.node = node;
    }

    public Builder pipelines(PipelineAdmin pipelines) {
      this.pipelines = pipelines;
      return this;
    }

    /** The exposition {@code GET /metrics} and {@code GET /admin/metrics} serve. */
    public Builder metrics(Supplier<String> exposition) {
      this.metrics = exposition;
      return this;
    }

    /** The document API, with the largest body a write accepts. */
    public Builder documents(Documents documents, long maxDocumentBytes) {
      this.documents = documents;
      this.maxDocumentBytes = maxDocumentBytes;
      return this;
    }

    /** Bounds of the batch endpoint ({@link BatchLimits#DEFAULTS} unless given). */
    public Builder documentBatches(BatchLimits limits) {
      this.batchLimits = limits;
      return this;
    }

    public Builder projections(Projections projections) {
      this.projections = projections;
      return this;
    }

    public Builder tokenKeys(TokenKeys tokenKeys) {
      this.tokenKeys = tokenKeys;
      return this;
    }

    public Builder principals(Principals principals) {
      this.principals = principals;
      return this;
    }

    public Builder policies(Policies policies) {
      this.policies = policies;
      return this;
    }

    public Builder feeds(Feeds feeds) {
      this.feeds = feeds;
      return this;
    }

    public Builder liveStreams(LiveStreams streams) {
      this.liveStreams = streams;
      return this;
    }

    public Builder continuous(ContinuousQueries continuous) {
      this.continuous = continuous;
      return this;
    }

    public Builder slotLag(SlotLag slotLag) {
      this.slotLag = slotLag;
      return this;
    }

    public Builder outboxSettings(OutboxSettings settings) {
      this.outboxSettings = settings;
      return this;
    }

    /** Times and counts every request on {@code http}; {@code access} opens {@code /metrics}. */
    public Builder httpMetrics(HttpMetrics http, MetricsSettings access) {
      this.httpMetrics = http;
      this.metricsAccess = access;
      return this;
    }

    public ApiServices build() {
      return new ApiServices(
          authenticator,
          node,
          pipelines,
          metrics,
          documents,
          maxDocumentBytes,
          batchLimits,
          projections,
          tokenKeys,
          principals,
          policies,
          feeds,
          liveStreams,
          continuous,
          slotLag,
          outboxSettings,
          httpMetrics,
          metricsAccess);
    }
  }
}
