package io.weir.protocol.cdc;

import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.TupleData;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One change inside a committed transaction. Row images are {@link TupleData}, whose {@code
 * toString()} shows only shapes, so a change can be logged without leaking a value.
 */
public sealed interface Change {

  /** A new row. */
  record Insert(TableSchema table, TupleData newRow) implements Change {
    public Insert {
      Objects.requireNonNull(table, "table");
      Objects.requireNonNull(newRow, "newRow");
    }
  }

  /**
   * A changed row. Columns of {@code newRow} that are unchanged TOAST values carry no value (see
   * {@link #unchangedToastColumns()}); a sink must leave them as they are.
   *
   * @param oldKind whether {@code oldRow} is the old key ({@link OldTupleKind#KEY}, sent when a key
   *     column changed), the whole old row ({@link OldTupleKind#FULL}, REPLICA IDENTITY FULL) or
   *     absent ({@link OldTupleKind#NONE}: the key is unchanged and read from {@code newRow})
   */
  record Update(TableSchema table, OldTupleKind oldKind, TupleData oldRow, TupleData newRow)
      implements Change {
    public Update {
      Objects.requireNonNull(table, "table");
      Objects.requireNonNull(newRow, "newRow");
    }

    /** Names of the columns left unchanged whose (TOASTed) values the message omits. */
    public List<String> unchangedToastColumns() {
      List<String> names = new ArrayList<>();
      for (int i = 0; i < newRow.size(); i++) {
        if (newRow.isUnchangedToast(i)) {
          names.add(table.columns().get(i).name());
        }
      }
      return names;
    }
  }

  /** A removed row, identified by its old key or (REPLICA IDENTITY FULL) its whole old row. */
  record Delete(TableSchema table, OldTupleKind oldKind, TupleData oldRow) implements Change {
    public Delete {
      Objects.requireNonNull(table, "table");
      Objects.requireNonNull(oldRow, "oldRow");
    }
  }

  /** TRUNCATE of one or more tables. */
  record Truncate(List<TableSchema> tables, boolean cascade, boolean restartIdentity)
      implements Change {
    public Truncate {
      tables = List.copyOf(tables);
    }
  }

  /**
   * A transactional logical decoding message ({@code pg_logical_emit_message(true, ...)}). The
   * content is application data and never appears in {@code toString()}.
   */
  record Message(String prefix, byte[] content) implements Change {
    public Message {
      content = content.clone();
    }

    @Override
    public byte[] content() {
      return content.clone();
    }

    @Override
    public String toString() {
      return "Message[prefixLength=" + prefix.length() + ", contentLength=" + content.length + "]";
    }
  }
}
