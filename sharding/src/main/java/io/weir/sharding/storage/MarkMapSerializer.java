package io.weir.sharding.storage;

import io.weir.persistence.StorageSystem;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.NotSerializableException;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The binary form of a {@link MarkMap}, replicated between nodes and kept in each node's durable
 * store: a format byte, the number of entries, and per entry the partition, the epoch, the
 * sequence, whether an incarnation follows, and the incarnation (modified UTF-8); in format 2 then
 * whether a storage follows, and its system identifier and timeline. Format 1 (no storage) is still
 * read: durable stores written before it hold it. Error messages name the problem, never a value.
 */
public final class MarkMapSerializer extends SerializerWithStringManifest {
  /** Never reuse or change it: durable stores hold mark maps under it. */
  public static final int IDENTIFIER = 7_304;

  static final String MANIFEST = "M";
  static final byte FORMAT = 2;

  /** Marks without their storage, as written before storages were recorded. */
  static final byte FORMAT_WITHOUT_STORAGE = 1;

  public MarkMapSerializer(ExtendedActorSystem system) {}

  public MarkMapSerializer() {}

  @Override
  public int identifier() {
    return IDENTIFIER;
  }

  @Override
  public String manifest(Object o) {
    if (o instanceof MarkMap) {
      return MANIFEST;
    }
    throw new IllegalArgumentException("not a mark map: " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    if (!(o instanceof MarkMap map)) {
      throw new IllegalArgumentException("not a mark map: " + o.getClass().getName());
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(16 + map.marks().size() * 64);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeByte(FORMAT);
      out.writeInt(map.marks().size());
      for (Map.Entry<Integer, AckMark> e : map.marks().entrySet()) {
        AckMark m = e.getValue();
        out.writeInt(e.getKey());
        out.writeLong(m.epoch());
        out.writeLong(m.sequence());
        out.writeBoolean(m.incarnation() != null);
        if (m.incarnation() != null) {
          out.writeUTF(m.incarnation());
        }
        out.writeBoolean(m.storage() != null);
        if (m.storage() != null) {
          out.writeLong(m.storage().systemIdentifier());
          out.writeInt(m.storage().timeline());
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) throws NotSerializableException {
    if (!MANIFEST.equals(manifest)) {
      throw new NotSerializableException("unknown mark map manifest");
    }
    try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
      byte format = in.readByte();
      if (format != FORMAT && format != FORMAT_WITHOUT_STORAGE) {
        throw new NotSerializableException("unknown mark map format " + format);
      }
      int n = in.readInt();
      if (n < 0 || n > bytes.length) {
        throw new NotSerializableException("mark map with an impossible entry count");
      }
      Map<Integer, AckMark> marks = new HashMap<>();
      for (int i = 0; i < n; i++) {
        int partition = in.readInt();
        long epoch = in.readLong();
        long sequence = in.readLong();
        String incarnation = in.readBoolean() ? in.readUTF() : null;
        StorageSystem storage =
            format == FORMAT && in.readBoolean()
                ? new StorageSystem(in.readLong(), in.readInt())
                : null;
        marks.put(partition, new AckMark(epoch, incarnation, sequence, storage));
      }
      if (in.available() > 0) {
        throw new NotSerializableException("mark map with trailing bytes");
      }
      return new MarkMap(marks);
    } catch (NotSerializableException e) {
      throw e;
    } catch (IOException | IllegalArgumentException e) {
      throw new NotSerializableException("corrupt mark map (" + e.getClass().getSimpleName() + ")");
    }
  }
}
