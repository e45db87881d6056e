package io.weir.sharding.partition;

import io.weir.persistence.serialization.SerializationContract;
import java.util.List;

/**
 * The serialization contract of the sharding module: the partition's protocol (commands, replies),
 * its journal events (and the partition's snapshot before ADR 0032, {@link Partition.State}; the
 * current one has a binary serializer of its own, see {@code PartitionSnapshotSerializerTest}).
 */
class PartitionSerializationTest extends SerializationContract {
  @Override
  protected Class<?> anchor() {
    return PartitionProtocol.class;
  }

  @Override
  protected String module() {
    return "sharding";
  }

  /**
   * The v1 fixture of {@link PartitionProtocol.FramesReply} was written before {@link
   * PartitionProtocol.KeyReused}, {@link PartitionProtocol.StorageRefused}, {@link
   * PartitionProtocol.StorageBehind} and {@link PartitionProtocol.TableApplyFailed} existed: its
   * sample holds one reply of every other kind. That of {@link ReadProtocol.ScanCollection} before
   * it had a reader, that of {@link StatusProtocol.PartitionStatus} before it had a table status.
   */
  @Override
  protected void expectations(io.weir.persistence.serialization.SerializationFixtures f) {
    PartitionProtocol.FramesReply current =
        (PartitionProtocol.FramesReply) f.samples(PartitionProtocol.FramesReply.class).get(0);
    f.expectInVersion(
        "v1",
        PartitionProtocol.FramesReply.class,
        List.of(
            new PartitionProtocol.FramesReply(
                current.replies().stream()
                    .filter(
                        r ->
                            !(r instanceof PartitionProtocol.KeyReused)
                                && !(r instanceof PartitionProtocol.StorageRefused)
                                && !(r instanceof PartitionProtocol.StorageBehind)
                                && !(r instanceof PartitionProtocol.TableApplyFailed))
                    .toList())));
    // Written before a scan named its reader: it decodes as a scan of every document.
    ReadProtocol.ScanCollection scan =
        (ReadProtocol.ScanCollection) f.samples(ReadProtocol.ScanCollection.class).get(0);
    f.expectInVersion(
        "v1",
        ReadProtocol.ScanCollection.class,
        List.of(
            new ReadProtocol.ScanCollection(scan.collection(), scan.maxBytes(), scan.replyTo())));
    // Written before the partition kept a documents table: it decodes without a table status.
    StatusProtocol.PartitionStatus status =
        (StatusProtocol.PartitionStatus) f.samples(StatusProtocol.PartitionStatus.class).get(0);
    f.expectInVersion(
        "v1",
        StatusProtocol.PartitionStatus.class,
        List.of(
            new StatusProtocol.PartitionStatus(
                status.partition(),
                status.documents(),
                status.outboxFirst(),
                status.outboxNext(),
                status.outboxBytes(),
                status.journalEvents(),
                status.watermarks(),
                status.consumers(),
                null)));
    // Written before a frame could be written in parts (ADR 0033): no cut.
    Partition.FrameApplied frame =
        (Partition.FrameApplied) f.samples(Partition.FrameApplied.class).get(0);
    f.expectInVersion("v1", Partition.FrameApplied.class, List.of(withoutCut(frame)));
    Partition.Written written = (Partition.Written) f.samples(Partition.Written.class).get(0);
    f.expectInVersion(
        "v1",
        Partition.Written.class,
        List.of(
            new Partition.Written(
                written.incarnation(),
                written.frames().stream().map(PartitionSerializationTest::withoutCut).toList())));
    // Written when the message also carried the writes it was for (they stay with the partition).
    BodiesFetchedV1 fetched = (BodiesFetchedV1) f.samples(BodiesFetchedV1.class).get(0);
    f.expectInVersion(
        "v1",
        Partition.BodiesFetched.class,
        List.of(
            new Partition.BodiesFetched(fetched.rows(), fetched.failure(), List.of(), List.of())));
    // Written before the table status told an upgrade's progress.
    StatusProtocol.TableStatus table =
        (StatusProtocol.TableStatus) f.samples(StatusProtocol.TableStatus.class).get(0);
    f.expectInVersion(
        "v1",
        StatusProtocol.TableStatus.class,
        List.of(
            new StatusProtocol.TableStatus(
                table.state(),
                table.appliedThrough(),
                table.lagEvents(),
                table.failures(),
                table.lastError())));
    // Written before marks and status views recorded their storage (system, timeline).
    StatusProtocol.StorageView view =
        (StatusProtocol.StorageView) f.samples(StatusProtocol.StorageView.class).get(0);
    f.expectInVersion(
        "v1",
        StatusProtocol.StorageView.class,
        List.of(
            new StatusProtocol.StorageView(
                view.state(), view.acknowledged(), view.epoch(), view.copies())));
    Partition.StorageChecked checked =
        (Partition.StorageChecked) f.samples(Partition.StorageChecked.class).get(0);
    f.expectInVersion(
        "v1",
        Partition.StorageChecked.class,
        // The generated sample's later values moved with the storage's two fields.
        List.of(new Partition.StorageChecked(withoutStorage(checked.mark()), "text-4")));
    Partition.StorageLossMarked marked =
        (Partition.StorageLossMarked) f.samples(Partition.StorageLossMarked.class).get(0);
    f.expectInVersion(
        "v1",
        Partition.StorageLossMarked.class,
        List.of(
            new Partition.StorageLossMarked(
                withoutStorage(marked.mark()), marked.lost() - 2, marked.replyTo())));
  }

  private static io.weir.sharding.storage.AckMark withoutStorage(
      io.weir.sharding.storage.AckMark m) {
    return new io.weir.sharding.storage.AckMark(m.epoch(), m.incarnation(), m.sequence());
  }

  /** The shape of {@link Partition.BodiesFetched} when its v1 fixture was written. */
  private record BodiesFetchedV1(
      List<PartitionProtocol.Write> writes,
      org.apache.pekko.actor.typed.ActorRef<PartitionEntity.BatchWritten> done,
      List<DocumentTable.Row> rows,
      String failure) {}

  @Override
  protected java.util.Map<String, String> retired() {
    return java.util.Map.of(
        "io.weir.sharding.partition.Partition$TableSeed",
        "the partition asked itself for its heap's documents to seed the documents table; the"
            + " heap holds none since ADR 0032 and the message never left its actor");
  }

  private static Partition.FrameApplied withoutCut(Partition.FrameApplied f) {
    return new Partition.FrameApplied(
        f.commandId(),
        f.entries(),
        f.source(),
        f.reset(),
        f.loaded(),
        f.consumer(),
        f.fenced(),
        f.rule(),
        null);
  }

  @Override
  protected List<Class<?>> knownBound() {
    return List.of(
        PartitionProtocol.ApplyFrame.class,
        PartitionProtocol.Upsert.class,
        Partition.Written.class,
        Partition.Purged.class,
        Partition.State.class,
        Partition.SnapshotMark.class,
        PartitionEntity.BatchWritten.class);
  }
}
