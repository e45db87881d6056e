package io.weir.persistence.cdc;

import io.weir.persistence.serialization.SerializationContract;
import java.util.List;

/**
 * The serialization contract of the persistence module's messages (pipeline statuses and replies).
 */
class CdcSerializationTest extends SerializationContract {
  @Override
  protected Class<?> anchor() {
    return PipelineStatus.class;
  }

  @Override
  protected String module() {
    return "persistence";
  }

  @Override
  protected List<Class<?>> knownBound() {
    return List.of(
        PipelineStatus.class,
        SnapshotStatus.class,
        CdcPipeline.DropReply.class,
        CdcPipeline.SnapshotReply.class,
        CdcPipeline.CheckReply.class,
        TableVerdict.class);
  }
}
