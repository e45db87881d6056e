package io.weir.persistence.cdc;

import io.weir.persistence.cdc.sink.TableHandling;
import io.weir.protocol.CborSerializable;

/**
 * What a pipeline's sink would do with one published table.
 *
 * @param table {@code schema.table} as PostgreSQL names it (an identifier, not row data)
 * @param handling {@link TableHandling#wire()}
 * @param reason for {@code refused}: the sink's typed reason (e.g. {@code no-row-identity}); else
 *     null
 * @param detail value-free: names tables, columns and settings, and for a refusal what to do
 */
public record TableVerdict(String table, String handling, String reason, String detail)
    implements CborSerializable {

  public static TableVerdict handled(String table, TableHandling handling, String detail) {
    return new TableVerdict(table, handling.wire(), null, detail);
  }

  public static TableVerdict refused(String table, String reason, String detail) {
    return new TableVerdict(table, TableHandling.REFUSED.wire(), reason, detail);
  }
}
