-- A table several times larger than shared_buffers (128MB in pg18-aio.toml):
-- 1.6 million rows of ~250 bytes, about 420 MB, read by a sequential scan.
CREATE TABLE aio_scan AS
SELECT g AS id, md5(g::text) AS k, repeat('x', 200) AS pad
FROM generate_series(1, 1600000) AS g;
VACUUM (FREEZE, ANALYZE) aio_scan;
