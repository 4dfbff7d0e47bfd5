-- Back to migration 14: no search by unique key or group.
DROP INDEX executions_group;
DROP INDEX executions_unique_key;
