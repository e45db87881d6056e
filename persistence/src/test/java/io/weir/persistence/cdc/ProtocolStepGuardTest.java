package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.protocol.Lsn;
import io.weir.protocol.pgoutput.PgOutputDecodeException;
import io.weir.protocol.pgoutput.PgOutputDecoder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

/** What a decoding or assembly step's failure becomes in the pipeline. */
class ProtocolStepGuardTest {
  private static final Lsn AT = Lsn.parse("0/16B3748");

  @Test
  void anUnexpectedRuntimeExceptionHaltsProtocolViolationWithoutItsMessage() {
    assertThatThrownBy(
            () ->
                CdcPipeline.guardProtocolStep(
                    AT,
                    () -> {
                      throw new IllegalStateException("row value secret-42");
                    }))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(HaltReason.PROTOCOL_VIOLATION);
              assertThat(e.detail())
                  .contains("0/16B3748")
                  .contains("IllegalStateException")
                  .contains("ProtocolStepGuardTest")
                  .doesNotContain("secret-42");
            });
  }

  @Test
  void typedFailuresPassUnchanged() {
    PipelineHaltException halt = new PipelineHaltException(HaltReason.SCHEMA_INCOMPATIBLE, "x");
    assertThatThrownBy(
            () ->
                CdcPipeline.guardProtocolStep(
                    AT,
                    () -> {
                      throw halt;
                    }))
        .isSameAs(halt);
    UncheckedIOException disk = new UncheckedIOException("cannot write", new IOException());
    assertThatThrownBy(
            () ->
                CdcPipeline.guardProtocolStep(
                    AT,
                    () -> {
                      throw disk;
                    }))
        .as("a spill file that cannot be written restarts: the disk may recover")
        .isSameAs(disk);
    assertThatThrownBy(
            () ->
                CdcPipeline.guardProtocolStep(
                    AT, () -> new PgOutputDecoder().decode(ByteBuffer.wrap(new byte[] {'Z'}))))
        .isInstanceOf(PgOutputDecodeException.class);
    assertThat(CdcPipeline.guardProtocolStep(AT, () -> "ok")).isEqualTo("ok");
  }
}
