-- Rows per loaded table, as the planner's statistics count them after VACUUM
-- ANALYZE (the meta table is pgrig's, not the specification's).
SELECT relname, reltuples::bigint FROM pg_class
WHERE relnamespace = 'tpcc'::regnamespace AND relkind = 'r' AND relname <> 'meta'
