-- Nothing changes on SQLite: PostgreSQL's migration 16 adds the flow claim
-- as one server-side function (roster_flow_claim); SQLite runs the same
-- claim as statements in one transaction of its single writer. The version
-- is kept so that both engines' schemas have the same numbers.
SELECT 1;
