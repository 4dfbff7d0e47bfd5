-- Back to migration 17: a row per group in lane_groups (every group that
-- executions of a lane with turns were ever created in, and the group '' of
-- each such lane, none of them served yet) and the ready index by group
-- first.
CREATE TABLE lane_groups (
    namespace  TEXT   NOT NULL,
    lane       TEXT   NOT NULL,
    group_key  TEXT   NOT NULL,
    served_seq INTEGER NOT NULL DEFAULT 0 CHECK (served_seq >= 0),
    PRIMARY KEY (namespace, lane, group_key)
) STRICT;

INSERT INTO lane_groups (namespace, lane, group_key)
SELECT DISTINCT lt.namespace, lt.lane, '' FROM lane_turns AS lt
UNION
SELECT DISTINCT e.namespace, e.lane, e.group_key
FROM executions AS e
WHERE EXISTS (SELECT 1 FROM lane_turns AS lt WHERE lt.namespace = e.namespace AND lt.lane = e.lane);

DROP TABLE lane_turns;

DROP INDEX executions_ready;
CREATE INDEX executions_ready ON executions (namespace, lane, group_key, priority DESC, run_at_ms, id)
    WHERE state = 'waiting' AND ready = 1;
