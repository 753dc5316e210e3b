-- The loader: rows generated inside the server (clause 4.3.3), one function per
-- part of a warehouse so that parts of different warehouses load in parallel
-- connections. Random strings are substrings at random offsets of a pool of
-- random characters drawn once per call: generating every character with its
-- own random() would cost more than everything else together.

-- Random a-string / n-string of length lo..hi from a pool (clause 4.3.2.2).
-- One SELECT without FROM: the planner inlines it, so it costs no call. The
-- pool is bytea because substr() of text in a multibyte database walks the
-- string from its start (12 us a call here), of bytea it does not (0.4 us).
CREATE FUNCTION tpcc.pick(pool bytea, lo int, hi int) RETURNS text
LANGUAGE sql VOLATILE AS
$$ SELECT convert_from(substr(pool, tpcc.rnd(1, 1000), tpcc.rnd(lo, hi)), 'UTF8') $$;

-- 1,500 random ASCII characters from `alphabet`: offsets up to 1,000, lengths up to 500.
CREATE FUNCTION tpcc.pool(alphabet text) RETURNS bytea
LANGUAGE sql VOLATILE AS
$$ SELECT convert_to(string_agg(substr(alphabet, tpcc.rnd(1, length(alphabet)), 1), ''), 'UTF8')
   FROM generate_series(1, 1500) $$;

CREATE FUNCTION tpcc.alnum_pool() RETURNS bytea
LANGUAGE sql VOLATILE AS
$$ SELECT tpcc.pool('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789') $$;

CREATE FUNCTION tpcc.digit_pool() RETURNS bytea
LANGUAGE sql VOLATILE AS
$$ SELECT tpcc.pool('0123456789') $$;

-- 10% of I_DATA and S_DATA hold "ORIGINAL" at a random position (4.3.3.1).
CREATE FUNCTION tpcc.original(s text, yes boolean) RETURNS text
LANGUAGE sql VOLATILE AS
$$ SELECT CASE WHEN yes THEN overlay(s PLACING 'ORIGINAL' FROM tpcc.rnd(1, length(s) - 7) FOR 8)
               ELSE s END $$;

CREATE FUNCTION tpcc.load_items() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    p bytea := tpcc.alnum_pool();
    n bigint;
BEGIN
    INSERT INTO tpcc.item (i_id, i_im_id, i_name, i_price, i_data)
    SELECT i, tpcc.rnd(1, 10000), tpcc.pick(p, 14, 24), tpcc.rnd(100, 10000) / 100.0,
           tpcc.original(s, orig)
    FROM (SELECT i, tpcc.pick(p, 26, 50) AS s, random() < 0.1 AS orig
          FROM generate_series(1, 100000) AS i) AS x;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

CREATE FUNCTION tpcc.load_stock(w int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    p bytea := tpcc.alnum_pool();
    n bigint;
BEGIN
    INSERT INTO tpcc.stock
    SELECT w, i, tpcc.rnd(10, 100), 0, 0, 0, tpcc.original(s, orig),
           tpcc.pick(p, 24, 24), tpcc.pick(p, 24, 24), tpcc.pick(p, 24, 24),
           tpcc.pick(p, 24, 24), tpcc.pick(p, 24, 24), tpcc.pick(p, 24, 24),
           tpcc.pick(p, 24, 24), tpcc.pick(p, 24, 24), tpcc.pick(p, 24, 24),
           tpcc.pick(p, 24, 24)
    FROM (SELECT i, tpcc.pick(p, 26, 50) AS s, random() < 0.1 AS orig
          FROM generate_series(1, 100000) AS i) AS x;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- The warehouse row, its 10 districts, 30,000 customers and their history rows.
CREATE FUNCTION tpcc.load_customers(w int, c_last int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    p bytea := tpcc.alnum_pool();
    digits bytea := tpcc.digit_pool();
    now_ts timestamp := localtimestamp;
    n bigint;
    total bigint := 0;
BEGIN
    INSERT INTO tpcc.warehouse
    VALUES (w, 300000.00, tpcc.rnd(0, 2000) / 10000.0, tpcc.pick(p, 6, 10),
            tpcc.pick(p, 10, 20), tpcc.pick(p, 10, 20), tpcc.pick(p, 10, 20),
            tpcc.pick(p, 2, 2), tpcc.pick(digits, 4, 4) || '11111');
    INSERT INTO tpcc.district
    SELECT w, d, 30000.00, tpcc.rnd(0, 2000) / 10000.0, 3001, tpcc.pick(p, 6, 10),
           tpcc.pick(p, 10, 20), tpcc.pick(p, 10, 20), tpcc.pick(p, 10, 20),
           tpcc.pick(p, 2, 2), tpcc.pick(digits, 4, 4) || '11111'
    FROM generate_series(1, 10) AS d;
    -- C_LAST: 0..999 in order for the first 1,000 customers of a district, then
    -- NURand(255, 0, 999) with the load-time constant C (4.3.3.1).
    INSERT INTO tpcc.customer
    SELECT w, d, c, tpcc.rnd(0, 5000) / 10000.0,
           CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END,
           tpcc.last_name(last_n), tpcc.pick(p, 8, 16), 50000.00, -10.00, 10.00, 1, 0,
           tpcc.pick(p, 10, 20), tpcc.pick(p, 10, 20), tpcc.pick(p, 10, 20),
           tpcc.pick(p, 2, 2), tpcc.pick(digits, 4, 4) || '11111',
           tpcc.pick(digits, 16, 16), now_ts, 'OE', tpcc.pick(p, 300, 500)
    FROM (SELECT d, c,
                 CASE WHEN c <= 1000 THEN c - 1 ELSE tpcc.nurand(255, 0, 999, c_last) END
                     AS last_n
          FROM generate_series(1, 10) AS d, generate_series(1, 3000) AS c) AS x;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := n + 11;
    INSERT INTO tpcc.history
    SELECT c, d, w, d, w, now_ts, 10.00, tpcc.pick(p, 12, 24)
    FROM generate_series(1, 10) AS d, generate_series(1, 3000) AS c;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN total + n;
END $$;

-- 3,000 orders per district for a random permutation of the customers, their
-- 5..15 lines, and the 900 newest orders (2101..3000) undelivered (4.3.3.1).
CREATE FUNCTION tpcc.load_orders(w int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    p bytea := tpcc.alnum_pool();
    now_ts timestamp := localtimestamp;
    n bigint;
    total bigint;
BEGIN
    WITH o AS (
        INSERT INTO tpcc.orders
        SELECT w, d, perm.o_id, perm.c, CASE WHEN perm.o_id < 2101 THEN tpcc.rnd(1, 10) END,
               tpcc.rnd(5, 15), 1, now_ts
        FROM generate_series(1, 10) AS d,
             LATERAL (SELECT (row_number() OVER (ORDER BY random()))::int AS o_id, c
                      FROM generate_series(1, 3000) AS c
                      WHERE d > 0) AS perm  -- refers to d: a new permutation per district
        RETURNING o_d_id, o_id, o_ol_cnt
    )
    INSERT INTO tpcc.order_line
    SELECT w, o.o_d_id, o.o_id, l, tpcc.rnd(1, 100000), w,
           CASE WHEN o.o_id < 2101 THEN now_ts END, 5,
           CASE WHEN o.o_id < 2101 THEN 0.00 ELSE tpcc.rnd(1, 999999) / 100.0 END,
           tpcc.pick(p, 24, 24)
    FROM o, generate_series(1, o.o_ol_cnt) AS l;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := n + 30000;
    INSERT INTO tpcc.new_order
    SELECT w, d, o FROM generate_series(1, 10) AS d, generate_series(2101, 3000) AS o;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN total + n;
END $$;
