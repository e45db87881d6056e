-- Token rotation without downtime: POST /admin/principals/{id}/rotate gives a principal a new token
-- and keeps the previous one's SHA-256 valid until previous_valid_until (the grace period); a
-- second rotation or a revocation ends that grace at once.
ALTER TABLE principals ADD COLUMN previous_token_hash BYTEA CHECK (octet_length(previous_token_hash) = 32);
ALTER TABLE principals ADD COLUMN previous_valid_until TIMESTAMPTZ;
ALTER TABLE principals ADD CONSTRAINT principals_previous_token_check
  CHECK ((previous_token_hash IS NULL) = (previous_valid_until IS NULL));
