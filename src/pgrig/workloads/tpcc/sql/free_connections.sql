-- Connections still available to a non-superuser: max_connections minus the
-- reserved ones minus the backends already connected.
SELECT current_setting('max_connections')::int
       - current_setting('superuser_reserved_connections')::int
       - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')
