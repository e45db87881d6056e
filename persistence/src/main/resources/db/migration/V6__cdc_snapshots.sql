-- Snapshots. cdc_slot.snapshot_state is 'pending' from the creation of a slot for an initial
-- snapshot until its hand-off checkpoint is stored, then 'done'; NULL for slots streamed without
-- one. cdc_checkpoint.snapshot_progress holds the library checkpoint store's incremental snapshot
-- progress (an opaque token written after each delivered chunk).
ALTER TABLE cdc_slot ADD COLUMN snapshot_state TEXT CHECK (snapshot_state IN ('pending', 'done'));
ALTER TABLE cdc_checkpoint ADD COLUMN snapshot_progress TEXT;
