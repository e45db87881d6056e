-- Continuous top-N queries (ADR 0014). A principal needs the ContinuousQuery grant on a security
-- scope (the grant's collection column names the scope) to register, read or unregister a query
-- of that scope.
ALTER TABLE grants DROP CONSTRAINT grants_grant_name_check;
ALTER TABLE grants ADD CONSTRAINT grants_grant_name_check CHECK (
  (grant_name IN ('DocumentsRead', 'DocumentsWrite', 'ChangesRead', 'QueryRead', 'ContinuousQuery') AND field = '')
  OR (grant_name = 'FieldUse' AND field <> '')
  OR (grant_name = 'FieldRead' AND field <> '' AND field <> '*'));

-- One row per subscription. The id is derived from the subscription identity (database, plan
-- fingerprint, parameters, scope and login role, policy version, limit), so registering the same
-- query twice finds the same row. The definition holds what the node needs to run the query again
-- after a restart: SQL text, parameter values, key and order columns, limit and the tables it
-- reads. Materialised results and the replay log are not stored here.
CREATE TABLE continuous_query (
  id          TEXT        PRIMARY KEY CHECK (id ~ '^cq_[0-9a-f]{32}$'),
  scope       TEXT        NOT NULL CHECK (scope ~ '^[a-z_][a-z0-9_]{0,62}$'),
  login_role  TEXT        NOT NULL,
  definition  JSONB       NOT NULL,
  created_by  TEXT        NOT NULL,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
