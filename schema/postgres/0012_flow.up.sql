-- Flow control: limits per lane (a cap on running executions, a cap per
-- group, a rate per window, a pause) and groups of executions that take
-- turns inside a lane.
--   * lane_limits holds one row per limited lane, with the rate window's
--     count (window_start_ms, window_claims: the claims of the window that
--     began at window_start_ms), kept by the claims of that lane only;
--   * lane_groups holds one row per group of a lane that has groups (the
--     group '' of executions without one included), with when it was last
--     served (served_seq, a counter of the lane's claims): groups take turns,
--     the least recently served first. A lane with neither row is claimed as
--     before, at no extra cost;
--   * executions.group_key is the execution's group ('' when none). The ready
--     index orders each group's executions of a lane for the claim; a lane
--     without groups has one group, so its order is what it was;
--   * executions_running counts a lane's and a group's running executions
--     for the caps.
CREATE TABLE lane_limits (
    namespace             TEXT    NOT NULL,
    lane                  TEXT    NOT NULL,
    max_running           BIGINT  NOT NULL,
    max_running_per_group BIGINT  NOT NULL,
    rate                  BIGINT  NOT NULL,
    rate_period_ms        BIGINT  NOT NULL,
    paused                BOOLEAN NOT NULL,
    window_start_ms       BIGINT  NOT NULL DEFAULT 0,
    window_claims         BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, lane),
    CONSTRAINT lane_limits_valid CHECK (
        namespace <> '' AND lane <> ''
        AND max_running >= 0 AND max_running_per_group >= 0 AND rate >= 0
        -- A rate comes with its period, 1 s to 24 h; no rate, no period.
        AND ((rate = 0 AND rate_period_ms = 0) OR (rate > 0 AND rate_period_ms BETWEEN 1000 AND 86400000))
        AND window_start_ms >= 0 AND window_claims >= 0
    )
);

CREATE TABLE lane_groups (
    namespace  TEXT   NOT NULL,
    lane       TEXT   NOT NULL,
    group_key  TEXT   NOT NULL,
    served_seq BIGINT NOT NULL DEFAULT 0 CHECK (served_seq >= 0),
    PRIMARY KEY (namespace, lane, group_key)
);

ALTER TABLE executions ADD COLUMN group_key TEXT NOT NULL DEFAULT '';

DROP INDEX executions_ready;
CREATE INDEX executions_ready ON executions (namespace, lane, group_key, priority DESC, run_at_ms, id)
    WHERE state = 'waiting' AND ready;
CREATE INDEX executions_running ON executions (namespace, lane, group_key) WHERE state = 'running';
