-- Groups take turns in key order, from the group last served, and a flow
-- claim finds the next group with ready work in the ready index itself: it
-- reads nothing per group, and a group without ready work costs nothing.
--   * lane_turns holds the turns of each lane whose executions have groups
--     (it replaces lane_groups, a row per group that every claim read): for
--     each priority and each set of worker capabilities, the group served
--     last ('' before the first claim). Turns are kept apart by priority, so
--     that work of one priority does not move another's turn, and by the
--     capabilities of the workers that claim, so that a worker that cannot
--     run a group's work does not pass that group's turn by. A lane with no
--     row here and none in lane_limits is claimed as before, at no extra
--     cost;
--   * the ready index orders a lane's executions by priority, then group,
--     then RunAt and id: at a priority, the first entry after a group is the
--     best execution of the next group that has ready work at that priority
--     (one probe), and a lane without groups (one group, '') reads in the
--     claim's order, as before;
--   * groups compare byte by byte (SQLite's BINARY), as on PostgreSQL.
-- The turns: at each priority, from the highest down, the groups after the
-- last served in key order, then from the first group up to it (the last
-- served ends the round); a group's first execution at a priority before any
-- group's second. A group that gets ready work starts within as many claims
-- of its lane, by workers that can run it, as there are groups with ready
-- work, itself included.
CREATE TABLE lane_turns (
    namespace    TEXT    NOT NULL,
    lane         TEXT    NOT NULL,
    priority     INTEGER NOT NULL,
    -- The claiming workers' capabilities: a sorted, duplicate-free JSON array.
    capabilities TEXT    NOT NULL,
    last_group   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, lane, priority, capabilities),
    CONSTRAINT lane_turns_valid CHECK (namespace <> '' AND lane <> '')
) STRICT;

-- Each lane's turns go on from the group it served last.
INSERT INTO lane_turns (namespace, lane, priority, capabilities, last_group)
SELECT l.namespace, l.lane, 0, '[]', (
    SELECT g.group_key FROM lane_groups AS g
    WHERE g.namespace = l.namespace AND g.lane = l.lane
    ORDER BY g.served_seq DESC, g.group_key
    LIMIT 1
)
FROM (SELECT DISTINCT namespace, lane FROM lane_groups) AS l;

DROP TABLE lane_groups;

DROP INDEX executions_ready;
CREATE INDEX executions_ready ON executions (namespace, lane, priority DESC, group_key, run_at_ms, id)
    WHERE state = 'waiting' AND ready = 1;
