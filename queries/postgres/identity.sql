-- Identity: where a session is, so that a caller's own transaction can be
-- checked to reach the Store's database and schema before anything is
-- written in it (CreateExecutionsTx).

-- name: IdentityCheck :one
-- IdentityCheck reads where a session is: its database, its current schema
-- ('' when none) and whether roster's identity table is visible there.
SELECT current_database()::text AS database, coalesce(current_schema(), '')::text AS schema,
       CAST(to_regclass('roster_identity') IS NOT NULL AS boolean) AS present;

-- name: IdentityGet :one
-- IdentityGet reads the identity of the roster schema a session reaches.
SELECT id FROM roster_identity;
