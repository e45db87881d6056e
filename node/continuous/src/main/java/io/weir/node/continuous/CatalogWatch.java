package io.weir.node.continuous;

import io.weir.persistence.SafeErrors;
import java.sql.SQLException;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Access rules and definitions that never reach the WAL ({@link #CATALOG_DIGEST}: policies,
 * privileges, memberships, views, columns, functions, operators, casts, domains). Per scope with
 * registrations, a digest of those catalogs is taken on the scope's login every refresh; when it
 * changes, every session of the scope is planned and read again ({@code catalog-changed}). The
 * first digest of a scope is taken before its sessions' first reads, so a change after it is never
 * missed. Engine thread only.
 */
final class CatalogWatch {
  private static final Logger log = LoggerFactory.getLogger(CatalogWatch.class);

  private final ContinuousSettings settings;
  private final ScopeReaders readers;

  /** Scope -> digest of the access catalogs at the last check. */
  private final Map<String, String> digests = new HashMap<>();

  CatalogWatch(ContinuousSettings settings, ScopeReaders readers) {
    this.settings = settings;
    this.readers = readers;
  }

  /**
   * Checks the catalogs of every configured scope {@code scopes} names; for each session of a scope
   * whose digest changed, stops trusting its projector and calls {@code reread} (plan again, read
   * in full). A scope whose check fails is checked again at the next refresh.
   */
  void check(Collection<String> scopes, Collection<Session> sessions, Consumer<Session> reread) {
    Set<String> watched = new TreeSet<>(scopes);
    for (String scope : watched) {
      if (!settings.scopes().containsKey(scope)) {
        continue;
      }
      String digest;
      try {
        digest =
            readers
                .get(scope)
                .readOnly(
                    c -> {
                      try (var st = c.createStatement();
                          var rs = st.executeQuery(CATALOG_DIGEST)) {
                        rs.next();
                        return rs.getString(1);
                      }
                    });
      } catch (SQLException | RuntimeException e) {
        log.warn(
            "continuous queries of scope {}: the catalog check failed; retrying: {}",
            scope,
            SafeErrors.describe(e));
        continue;
      }
      String previous = digests.get(scope);
      // No digest yet but sessions running (the first check failed after they started): anything
      // may have changed since they were planned, so it counts as a change.
      boolean changed =
          previous == null
              ? sessions.stream().anyMatch(x -> x.registration.scope().equals(scope))
              : !previous.equals(digest);
      if (changed) {
        for (Session s : List.copyOf(sessions)) {
          if (s.registration.scope().equals(scope)) {
            if (s.registration.definition().projector() != null && s.projectorOff == null) {
              // The projector's conditions (row security, identity) were checked against the old
              // catalog: it is not trusted again until the query is registered anew.
              s.projectorOff = "catalog-changed";
            }
            reread.accept(s);
          }
        }
      }
      // After every session of the scope has been planned again and read (a failed plan or read is
      // retried by the session itself: replan-pending, repair pending).
      digests.put(scope, digest);
    }
    digests.keySet().retainAll(watched);
  }

  /**
   * Digest of what decides a query's rows and plan but never reaches the WAL: policies, user
   * relations' names, schemas, owners, partitioning and inheritance, privileges and RLS flags,
   * schemas' privileges, the superuser, bypass-RLS and inherit flags of the roles the login acts as
   * (only those: roles are shared by every database, and another application creating one must not
   * read every session again), role memberships, view and rule definitions, the columns of user
   * relations (names, types, typmods, collations, column privileges), user functions (source or SQL
   * body, signature, volatility, security, settings, privileges), user operators and casts, and
   * user domains and enums. Temporary relations are left out (any session may create one). A change
   * to any of them, even one that turns out not to matter, reads the scope's sessions again:
   * spurious re-reads cost a read, a missed change a wrong result.
   */
  static final String CATALOG_DIGEST =
      "SELECT md5(concat_ws('|',"
          + " (SELECT string_agg(concat_ws('/', polrelid::text, polname::text, polcmd::text, polpermissive::text, polroles::text,"
          + "   pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid)), ';' ORDER BY polrelid, polname) FROM pg_policy),"
          + " (SELECT string_agg(concat_ws('/', oid::text, relname::text, relnamespace::text, relowner::text, relkind::text,"
          + "   relispartition::text, relrowsecurity::text, relforcerowsecurity::text, relacl::text), ';' ORDER BY oid)"
          + "   FROM pg_class WHERE relkind IN ('r', 'p', 'v', 'm', 'f') AND relpersistence <> 't' AND oid >= 16384),"
          + " (SELECT string_agg(concat_ws('/', inhrelid::text, inhparent::text), ';' ORDER BY inhrelid, inhparent)"
          + "   FROM pg_inherits),"
          + " (SELECT string_agg(concat_ws('/', oid::text, nspname::text, nspowner::text, nspacl::text), ';' ORDER BY oid)"
          + "   FROM pg_namespace WHERE oid >= 16384 OR nspname = 'public'),"
          + " (SELECT string_agg(concat_ws('/', oid::text, rolsuper::text, rolbypassrls::text, rolinherit::text), ';' ORDER BY oid)"
          + "   FROM pg_roles WHERE pg_has_role(current_user, oid, 'USAGE')),"
          + " (SELECT string_agg(concat_ws('/', roleid::text, member::text, admin_option::text), ';' ORDER BY roleid, member)"
          + "   FROM pg_auth_members),"
          + " (SELECT string_agg(concat_ws('/', r.ev_class::text, r.rulename::text, r.ev_type::text, r.ev_enabled::text,"
          + "   md5(r.ev_action::text), md5(coalesce(r.ev_qual::text, ''))), ';' ORDER BY r.ev_class, r.rulename)"
          + "   FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE c.relpersistence <> 't' AND r.ev_class >= 16384),"
          + " (SELECT md5(string_agg(concat_ws('/', a.attrelid::text, a.attnum::text, a.attname::text, a.atttypid::text,"
          + "   a.atttypmod::text, a.attcollation::text, a.attisdropped::text, a.attacl::text), ';' ORDER BY a.attrelid, a.attnum))"
          + "   FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
          + "   WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relpersistence <> 't' AND c.oid >= 16384 AND a.attnum > 0),"
          + " (SELECT string_agg(concat_ws('/', oid::text, md5(prosrc), md5(coalesce(prosqlbody::text, '')), proargtypes::text,"
          + "   prorettype::text, proretset::text, provolatile::text, proisstrict::text, prosecdef::text, proconfig::text, proacl::text),"
          + "   ';' ORDER BY oid)"
          + "   FROM pg_proc WHERE oid >= 16384),"
          + " (SELECT string_agg(concat_ws('/', oid::text, oprname::text, oprleft::text, oprright::text, oprresult::text, oprcode::text),"
          + "   ';' ORDER BY oid) FROM pg_operator WHERE oid >= 16384),"
          + " (SELECT string_agg(concat_ws('/', oid::text, castsource::text, casttarget::text, castfunc::text, castcontext::text,"
          + "   castmethod::text), ';' ORDER BY oid) FROM pg_cast WHERE oid >= 16384),"
          + " (SELECT string_agg(concat_ws('/', t.oid::text, t.typbasetype::text, t.typtypmod::text, t.typnotnull::text,"
          + "   (SELECT string_agg(pg_get_constraintdef(k.oid), ',' ORDER BY k.conname) FROM pg_constraint k WHERE k.contypid = t.oid)),"
          + "   ';' ORDER BY t.oid) FROM pg_type t WHERE t.oid >= 16384 AND t.typtype = 'd'),"
          + " (SELECT string_agg(concat_ws('/', enumtypid::text, enumsortorder::text, enumlabel::text), ';'"
          + "   ORDER BY enumtypid, enumsortorder) FROM pg_enum WHERE enumtypid >= 16384)))";
}
