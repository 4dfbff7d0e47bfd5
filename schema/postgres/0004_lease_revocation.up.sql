-- A lease that MarkWorkerDead or a sweep ended is revoked for good: renew,
-- complete and fail require revoked_at_ms IS NULL, so no later call brings it
-- back, whatever time it passes.
ALTER TABLE attempts ADD COLUMN revoked_at_ms BIGINT;
