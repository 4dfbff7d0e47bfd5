-- Executions found by their unique key or their group within a namespace,
-- finished ones included (executions_unique_live holds the live ones only),
-- in id order. Partial: an execution without a key or a group costs no
-- entry.
CREATE INDEX executions_unique_key ON executions (namespace, unique_key, id) WHERE unique_key IS NOT NULL;
CREATE INDEX executions_group ON executions (namespace, group_key, id) WHERE group_key <> '';
