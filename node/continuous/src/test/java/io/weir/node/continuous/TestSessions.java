package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.util.List;

/** Sessions for tests that drive the engine's parts without a registration. */
final class TestSessions {
  private TestSessions() {}

  /**
   * A registration keyed by {@code id}, ordered by {@code order} descending; columns, tables and
   * types as given ({@code tables} null: unknown).
   */
  static Definition definition(
      String order,
      int limit,
      List<String> columns,
      List<String> tables,
      List<String> types,
      Definition.Impact impact) {
    return new Definition(
        "SELECT ...",
        JsonNodeFactory.instance.objectNode(),
        List.of("id"),
        List.of(new Definition.OrderColumn(order, true)),
        limit,
        columns,
        tables,
        types,
        impact,
        null);
  }

  /** A session of {@code d} registered as {@code id} in {@code scope}. */
  static Session session(String id, String scope, Definition d, int retained) {
    return new Session(
        new RegistrationStore.Stored(id, scope, "role", d, "admin"),
        "e",
        retained,
        seq -> "id-" + seq);
  }
}
