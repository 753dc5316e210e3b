-- The server's non-default settings, plus the preset ones asked for by name
-- (the parameter: a text array of names). 'client' and 'session' values, and the
-- transaction_* 'override's, describe pgrig's own connection, not the server
-- under test. current_setting() formats units as postgresql.conf does ("16MB").
SELECT name, current_setting(name)
FROM pg_settings
WHERE (source NOT IN ('default', 'client', 'session')
       AND name NOT IN ('transaction_deferrable', 'transaction_isolation',
                        'transaction_read_only'))
   OR name = ANY(%s)
ORDER BY name
