-- Row-level and field-level policy (issue 7).
-- Principals belong to groups (an ACL field may name a group as "group:<name>").
ALTER TABLE principals ADD COLUMN groups TEXT[] NOT NULL DEFAULT '{}';

-- Field-level grants: FieldRead (see a sensitive field) and FieldUse (use a field in a query
-- predicate; field '*' covers every field that is not sensitive). Collection grants keep field ''.
ALTER TABLE grants ADD COLUMN field TEXT NOT NULL DEFAULT ''
  CHECK (field = '' OR field = '*' OR field ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$');
ALTER TABLE grants DROP CONSTRAINT grants_grant_name_check;
ALTER TABLE grants ADD CONSTRAINT grants_grant_name_check CHECK (
  (grant_name IN ('DocumentsRead', 'DocumentsWrite', 'ChangesRead', 'QueryRead') AND field = '')
  OR (grant_name = 'FieldUse' AND field <> '')
  OR (grant_name = 'FieldRead' AND field <> '' AND field <> '*'));
ALTER TABLE grants DROP CONSTRAINT grants_pkey;
ALTER TABLE grants ADD PRIMARY KEY (principal_id, collection, grant_name, field);

-- One policy per collection: its sensitive top-level fields and its row-visibility rule. Every
-- change takes a new version from policy_versions; partitions install the row rule and advance
-- the collection's row-visibility epoch, fencing every cursor issued under the old policy.
CREATE SEQUENCE policy_versions;
CREATE TABLE collection_policies (
  collection       TEXT        PRIMARY KEY CHECK (collection ~ '^[A-Za-z0-9_.-]{1,128}$'),
  version          BIGINT      NOT NULL,
  sensitive_fields TEXT[]      NOT NULL DEFAULT '{}',
  visibility       TEXT        NOT NULL CHECK (visibility IN ('none', 'acl', 'owner')),
  visibility_field TEXT        CHECK (visibility_field ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'),
  updated_at       TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
  CHECK ((visibility = 'none') = (visibility_field IS NULL))
);
