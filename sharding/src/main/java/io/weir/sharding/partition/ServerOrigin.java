package io.weir.sharding.partition;

import java.lang.reflect.Method;
import java.lang.reflect.RecordComponent;
import java.util.Optional;
import java.util.function.Predicate;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.BehaviorInterceptor;
import org.apache.pekko.actor.typed.TypedActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.typed.Cluster;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Partitions take commands from server nodes only. Every partition command is internal (CDC slices,
 * purges, consumer and watermark moves, reads for the node's own services): protocol clients reach
 * Weir through a server node's gateway, never a partition. A command whose reply address is a
 * remote one that is not a member with the server role is dropped with a value-free warning.
 *
 * <p>The reply address is what a command can show of its origin; Pekko does not authenticate it per
 * message, so this catches mistakes, never an attacker: it is no boundary. The boundary is that
 * only server nodes are members and reach the cluster port (ADR 0028); protocol clients use the
 * gateway's own port.
 */
public final class ServerOrigin {
  private static final Logger log = LoggerFactory.getLogger(ServerOrigin.class);
  private static final ClassValue<Optional<Method>> REPLY_TO =
      new ClassValue<>() {
        @Override
        protected Optional<Method> computeValue(Class<?> type) {
          if (!type.isRecord()) {
            return Optional.empty();
          }
          for (RecordComponent c : type.getRecordComponents()) {
            if (c.getName().equals("replyTo") && ActorRef.class.isAssignableFrom(c.getType())) {
              Method m = c.getAccessor();
              m.setAccessible(true);
              return Optional.of(m);
            }
          }
          return Optional.empty();
        }
      };

  private ServerOrigin() {}

  /** The address a command's reply goes to; empty for commands without one. */
  static Optional<Address> replyAddress(Object command) {
    return REPLY_TO
        .get(command.getClass())
        .map(
            m -> {
              try {
                ActorRef<?> ref = (ActorRef<?>) m.invoke(command);
                return ref == null ? null : ref.path().address();
              } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(
                    "cannot read the reply address of a partition command", e);
              }
            });
  }

  /**
   * Whether a command may be handled: it has no reply address, or a local one, or that of a member
   * for which {@code server} holds.
   */
  static boolean accepted(Object command, Predicate<Address> server) {
    Optional<Address> origin = replyAddress(command);
    return origin.isEmpty() || !origin.get().hasGlobalScope() || server.test(origin.get());
  }

  /** {@code behavior} behind the check, with the cluster's current members deciding. */
  public static <T> Behavior<T> guard(Behavior<T> behavior, Class<T> type, String role) {
    return Behaviors.setup(
        ctx -> {
          Cluster cluster = Cluster.get(ctx.getSystem());
          Address self = cluster.selfMember().address();
          Predicate<Address> server =
              address -> address.equals(self) || isServer(cluster, address, role);
          return Behaviors.intercept(
              () ->
                  new BehaviorInterceptor<T, T>(type) {
                    @Override
                    public Behavior<T> aroundReceive(
                        TypedActorContext<T> c, T message, ReceiveTarget<T> target) {
                      if (accepted(message, server)) {
                        return target.apply(c, message);
                      }
                      log.warn(
                          "an entity refused a {} whose reply address {} is not a member with the {} role",
                          message.getClass().getSimpleName(),
                          replyAddress(message).map(Address::toString).orElse("?"),
                          role);
                      return Behaviors.same();
                    }
                  },
              behavior);
        });
  }

  private static boolean isServer(Cluster cluster, Address address, String role) {
    for (Member m : cluster.state().getMembers()) {
      if (m.address().equals(address)) {
        return m.hasRole(role);
      }
    }
    return false;
  }
}
