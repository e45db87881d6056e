package io.weir.node.cdc;

import io.weir.node.auth.PrincipalsChanged;
import io.weir.node.feed.TailsAdvanced;
import io.weir.persistence.serialization.SerializationContract;
import java.util.List;

/**
 * The serialization contract of the node module's cluster messages (pipeline manager, principal
 * changes, outbox signals).
 */
class NodeSerializationTest extends SerializationContract {
  @Override
  protected Class<?> anchor() {
    return PipelineManager.class;
  }

  @Override
  protected String module() {
    return "node";
  }

  @Override
  protected List<Class<?>> knownBound() {
    return List.of(
        PipelineManager.Get.class,
        PipelineManager.PipelineList.class,
        PrincipalsChanged.class,
        TailsAdvanced.class);
  }
}
