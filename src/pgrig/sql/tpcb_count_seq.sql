-- Seed 000: count(*) forced onto a sequential scan of the heap.
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SET enable_seqscan = on;
EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM pgbench_accounts;
