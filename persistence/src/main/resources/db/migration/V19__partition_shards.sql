-- How the cluster's partitions are grouped into Cluster Sharding shards (ADR 0052): S >= 1 puts
-- partition n in shard n mod S; 0 is Pekko's default, one shard per partition by hash. Every node
-- of a cluster must use the same layout (two layouts would run a partition twice), so it is fixed
-- when the cluster is created. A cluster that exists when this migration runs was created before
-- layouts were recorded: its nodes use Pekko's default, recorded here as 0.
ALTER TABLE cluster ADD COLUMN partition_shards INTEGER CHECK (partition_shards BETWEEN 0 AND 65536);
UPDATE cluster SET partition_shards = 0;
