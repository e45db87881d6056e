-- The cluster's partition count P, fixed when the cluster is created: a document's partition is a
-- hash modulo P, so a node configured with another P must not run against this database.
-- NULL only for clusters created before this migration; the first node to start sets it.
ALTER TABLE cluster ADD COLUMN partition_count INTEGER CHECK (partition_count BETWEEN 1 AND 65536);
