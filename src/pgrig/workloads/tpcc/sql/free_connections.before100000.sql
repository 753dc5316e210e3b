-- Connections still available to a non-superuser, for servers before 10: their
-- pg_stat_activity lists client backends only (no backend_type column yet).
SELECT current_setting('max_connections')::int
       - current_setting('superuser_reserved_connections')::int
       - (SELECT count(*) FROM pg_stat_activity)
