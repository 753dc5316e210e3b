-- One sequential scan of the whole table: in PostgreSQL 18 a read stream,
-- which issues its reads through io_method (sync: one at a time, by the backend;
-- worker: handed to io_workers processes, up to effective_io_concurrency ahead).
SELECT count(*) FROM aio_scan WHERE pad <> '';
