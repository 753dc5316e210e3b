-- What psql's \dt+ and \di+ list: the user's tables and indexes (partitions and
-- partitioned parents included) with pg_table_size, largest first.
SELECT CASE WHEN n.nspname = 'public' THEN c.relname ELSE n.nspname || '.' || c.relname END,
       CASE WHEN c.relkind IN ('i', 'I') THEN 'index' ELSE 'table' END,
       pg_table_size(c.oid),
       CASE WHEN c.relkind IN ('i', 'I') THEN t.relname END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_class t ON t.oid = i.indrelid
WHERE c.relkind IN ('r', 'p', 'i', 'I')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\_toast%'
  AND n.nspname NOT LIKE 'pg\_temp%'
  AND c.relname NOT LIKE 'pgrig\_%'
ORDER BY 3 DESC, 1
