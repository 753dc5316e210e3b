-- Seed 000: count(*) forced onto the primary key, as an index-only scan.
SET enable_indexscan = on;
SET enable_indexonlyscan = on;
SET enable_bitmapscan = off;
SET enable_seqscan = off;
EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM pgbench_accounts;
