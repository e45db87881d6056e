package io.weir.node.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

class TextTableTest {
  @Test
  void columnsArePaddedNumbersRightAlignedNullsDashedAndLinesNotTrailed() {
    String text =
        new TextTable("NAME", "COUNT", "NOTE")
            .row("a", 5, null)
            .row("longer-name", 12345, "x")
            .render();
    assertThat(text)
        .isEqualTo(
            """
        NAME         COUNT  NOTE
        a                5  -
        longer-name  12345  x
        """);
    assertThat(text.lines()).as("no line ends in a space").noneMatch(l -> l.endsWith(" "));
  }

  @Test
  void aColumnWithAnyTextIsLeftAlignedAndControlCharactersDoNotBreakRows() {
    String text = new TextTable("N", "V").row(1, "two\nlines").row("x", 3).render();
    assertThat(text)
        .isEqualTo(
            """
        N  V
        1  two lines
        x  3
        """);
  }

  @Test
  void anEmptyTableIsItsHeader() {
    assertThat(new TextTable("A", "B").render()).isEqualTo("A  B\n");
  }

  @Test
  void aRowOfTheWrongWidthIsRefused() {
    assertThatThrownBy(() -> new TextTable("A", "B").row("x"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void snapshotProgressLines() throws Exception {
    ObjectMapper json = new ObjectMapper();
    assertThat(
            Progress.snapshotLine(
                json.readTree(
                    "{\"kind\":\"incremental\",\"state\":\"running\",\"tablesDone\":1,"
                        + "\"tablesTotal\":4,\"rowsDone\":12000,\"rowsEstimated\":30000,\"table\":\"public.orders\",\"elapsedMillis\":75000}")))
        .isEqualTo(
            "incremental snapshot running [########------------]  40% tables 1/4 rows 12,000/~30,000 public.orders 1m15s");
    assertThat(
            Progress.snapshotLine(
                json.readTree(
                    "{\"kind\":\"initial\",\"state\":\"running\",\"tablesDone\":1,"
                        + "\"tablesTotal\":4,\"rowsDone\":10,\"rowsEstimated\":0,\"table\":null,\"elapsedMillis\":500}")))
        .as("without an estimate, tables give the percentage")
        .isEqualTo("initial snapshot running [#####---------------]  25% tables 1/4 rows 10 0s");
    assertThat(
            Progress.snapshotLine(
                json.readTree(
                    "{\"kind\":\"incremental\",\"state\":\"running\",\"tablesDone\":3,"
                        + "\"tablesTotal\":4,\"rowsDone\":50000,\"rowsEstimated\":30000,\"table\":\"public.t\",\"elapsedMillis\":7200000}")))
        .as("an estimate that was too low stops at 99% until done")
        .contains(" 99% ")
        .endsWith("2h00m");
    assertThat(
            Progress.snapshotLine(
                json.readTree(
                    "{\"kind\":\"incremental\",\"state\":\"done\",\"tablesDone\":4,"
                        + "\"tablesTotal\":4,\"rowsDone\":29000,\"rowsEstimated\":30000,\"table\":null,\"elapsedMillis\":9000}")))
        .contains("[####################] 100%");
    assertThat(Progress.snapshotLine(null)).isEqualTo("no snapshot");
  }

  @Test
  void progressOffATerminalPrintsChangedLinesOnly() {
    java.io.StringWriter text = new java.io.StringWriter();
    Progress p = new Progress(new java.io.PrintWriter(text), false, 0);
    p.update("a");
    p.update("a");
    p.update("b");
    p.finish("b");
    assertThat(text.toString())
        .isEqualTo("a" + System.lineSeparator() + "b" + System.lineSeparator());
    java.io.StringWriter tty = new java.io.StringWriter();
    Progress t = new Progress(new java.io.PrintWriter(tty), true, 0);
    t.update("long line");
    t.finish("short");
    assertThat(tty.toString())
        .as("a terminal line is redrawn and cleared")
        .isEqualTo("\rlong line\rshort    " + System.lineSeparator());
  }
}
