-- Back to migration 12: no metadata, no released or snoozed attempts, no
-- attempt errors, no identity row.
DROP TABLE roster_identity;
DELETE FROM attempts WHERE state IN ('released', 'snoozed');
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_state_check
    CHECK (state IN ('completed', 'failed', 'reclaimed', 'cancelled'));
ALTER TABLE attempts DROP COLUMN error;
ALTER TABLE executions DROP COLUMN metadata;
