ALTER TABLE attempts DROP COLUMN revoked_at_ms;
