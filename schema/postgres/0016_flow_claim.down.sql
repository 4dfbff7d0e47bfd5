-- Back to migration 15: the flow claim runs as statements sent one by one.
DROP FUNCTION roster_flow_claim(TEXT, TEXT, BIGINT, UUID[], BIGINT, BOOLEAN, BIGINT);
DROP FUNCTION roster_lane_key(TEXT, TEXT);
