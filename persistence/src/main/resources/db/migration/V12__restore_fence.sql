-- Restores from a backup (deploy/bin/restore.sh, ADR 0012). The first node that starts on a
-- restored schema applies the restore fence: every token key is retired with
-- invalidated_by_restore (its tokens answer 409 token-invalidated), a new key signs, the cluster's
-- restore epoch advances and every CDC pipeline's slot record is marked restored (the pipeline
-- halts restored-from-backup until it is dropped and started afresh).
ALTER TABLE token_keys ADD COLUMN invalidated_by_restore BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE token_keys ADD CONSTRAINT token_keys_restore_check CHECK (NOT invalidated_by_restore OR retired_at IS NOT NULL);
ALTER TABLE cluster ADD COLUMN restore_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cluster ADD COLUMN restored_at TIMESTAMPTZ;
ALTER TABLE cdc_slot ADD COLUMN restored_at TIMESTAMPTZ;
