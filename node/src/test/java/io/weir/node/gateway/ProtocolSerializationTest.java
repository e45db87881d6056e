package io.weir.node.gateway;

import io.weir.persistence.serialization.SerializationContract;
import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import java.util.List;

/**
 * The serialization contract of the protocol jar's own messages (the protocol client's requests and
 * replies): checked here because the contract's fixtures and serializer live in test code of the
 * modules above the protocol. Fixtures in node/src/test/resources/serialization.
 */
class ProtocolSerializationTest extends SerializationContract {
  @Override
  protected Class<?> anchor() {
    return ClientRequest.class;
  }

  @Override
  protected String module() {
    return "node";
  }

  @Override
  protected List<Class<?>> knownBound() {
    return List.of(
        ClientRequest.PutDocument.class,
        ClientRequest.Post.class,
        ClientReply.Ok.class,
        ClientReply.Failed.class);
  }
}
