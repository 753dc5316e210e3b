-- Helpers shared by the loader and the transactions, and the five transactions
-- of clause 2 as PL/pgSQL functions: the server-side mode calls each with one
-- statement, so a transaction costs one round trip.

-- Uniform random integer in [lo, hi] (clause 2.1.4). One SELECT: inlined.
CREATE FUNCTION tpcc.rnd(lo int, hi int) RETURNS int
LANGUAGE sql VOLATILE AS
$$ SELECT lo + floor(random() * (hi - lo + 1))::int $$;

-- NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x (2.1.6).
CREATE FUNCTION tpcc.nurand(a int, x int, y int, c int) RETURNS int
LANGUAGE sql VOLATILE AS
$$ SELECT (((tpcc.rnd(0, a) | tpcc.rnd(x, y)) + c) % (y - x + 1)) + x $$;

-- C_LAST from a number 0..999: three syllables (4.3.2.3).
CREATE FUNCTION tpcc.last_name(n int) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT ('{BAR,OUGHT,ABLE,PRI,PRES,ESE,ANTI,CALLY,ATION,EING}'::text[])[n / 100 + 1]
       || ('{BAR,OUGHT,ABLE,PRI,PRES,ESE,ANTI,CALLY,ATION,EING}'::text[])[n / 10 % 10 + 1]
       || ('{BAR,OUGHT,ABLE,PRI,PRES,ESE,ANTI,CALLY,ATION,EING}'::text[])[n % 10 + 1] $$;

-- Customer by last name (2.5.2.2, 2.6.2.2): of the n customers of that name in
-- the district, sorted by C_FIRST, the one at position ceil(n / 2).
CREATE FUNCTION tpcc.customer_by_name(p_w int, p_d int, p_last_n int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    ids int[];
BEGIN
    SELECT array_agg(c_id ORDER BY c_first) INTO ids
    FROM tpcc.customer
    WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = tpcc.last_name(p_last_n);
    RETURN ids[(cardinality(ids) + 1) / 2];
END $$;

-- New-Order (2.4). 1% of them carry an unused item number on their last line
-- and must roll back (2.4.2.3): that case runs inside a block whose exception
-- undoes all of its work, and returns 0 - a completed transaction, as the
-- specification counts it. The other 99% pay for no subtransaction.
CREATE FUNCTION tpcc.new_order(p_w int, p_d int, p_c int, p_ol_cnt int, p_rbk boolean,
                               p_c_ol int, p_active int) RETURNS numeric
LANGUAGE plpgsql AS $$
BEGIN
    IF p_rbk THEN
        BEGIN
            PERFORM tpcc.new_order_body(p_w, p_d, p_c, p_ol_cnt, true, p_c_ol, p_active);
        EXCEPTION WHEN SQLSTATE 'TPC01' THEN
            RETURN 0;
        END;
        RAISE EXCEPTION 'New-Order with an unused item did not roll back';
    END IF;
    RETURN tpcc.new_order_body(p_w, p_d, p_c, p_ol_cnt, false, p_c_ol, p_active);
END $$;

CREATE FUNCTION tpcc.new_order_body(p_w int, p_d int, p_c int, p_ol_cnt int, p_rbk boolean,
                                    p_c_ol int, p_active int) RETURNS numeric
LANGUAGE plpgsql AS $$
DECLARE
    items int[];
    supply int[];
    qty int[];
    v_discount numeric;
    v_last text;
    v_credit text;
    v_w_tax numeric;
    v_d_tax numeric;
    v_o_id int;
    v_price numeric;
    v_name text;
    v_i_data text;
    v_s_data text;
    v_dist text;
    v_amount numeric;
    v_total numeric := 0;
BEGIN
    -- Lines: item NURand(8191, 1, 100000), 1% from another (active) warehouse,
    -- quantity 1..10 (2.4.1.5). Sorted by stock key so that concurrent
    -- New-Orders lock stock rows in one order and rarely deadlock.
    SELECT array_agg(i ORDER BY sw, i, n), array_agg(sw ORDER BY sw, i, n),
           array_agg(q ORDER BY sw, i, n)
    INTO items, supply, qty
    FROM (SELECT n,
                 CASE WHEN p_rbk AND n = p_ol_cnt THEN 100001
                      ELSE tpcc.nurand(8191, 1, 100000, p_c_ol) END AS i,
                 CASE WHEN p_active > 1 AND random() < 0.01
                      THEN (p_w + tpcc.rnd(0, p_active - 2)) % p_active + 1
                      ELSE p_w END AS sw,
                 tpcc.rnd(1, 10) AS q
          FROM generate_series(1, p_ol_cnt) AS n) AS lines;

    SELECT c_discount, c_last, c_credit, w_tax
    INTO v_discount, v_last, v_credit, v_w_tax
    FROM tpcc.customer, tpcc.warehouse
    WHERE w_id = p_w AND c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;

    UPDATE tpcc.district SET d_next_o_id = d_next_o_id + 1
    WHERE d_w_id = p_w AND d_id = p_d
    RETURNING d_tax, d_next_o_id - 1 INTO v_d_tax, v_o_id;

    INSERT INTO tpcc.orders
    VALUES (p_w, p_d, v_o_id, p_c, NULL, p_ol_cnt, (p_w = ALL (supply))::int, localtimestamp);
    INSERT INTO tpcc.new_order VALUES (p_w, p_d, v_o_id);

    FOR n IN 1 .. p_ol_cnt LOOP
        SELECT i_price, i_name, i_data INTO v_price, v_name, v_i_data
        FROM tpcc.item WHERE i_id = items[n];
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'TPC01', MESSAGE = 'Item number is not valid';
        END IF;
        UPDATE tpcc.stock
        SET s_quantity = CASE WHEN s_quantity >= qty[n] + 10 THEN s_quantity - qty[n]
                              ELSE s_quantity - qty[n] + 91 END,
            s_ytd = s_ytd + qty[n],
            s_order_cnt = s_order_cnt + 1,
            s_remote_cnt = s_remote_cnt + (supply[n] <> p_w)::int
        WHERE s_w_id = supply[n] AND s_i_id = items[n]
        RETURNING s_data, (ARRAY[s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05,
                                 s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10])[p_d]
        INTO v_s_data, v_dist;
        v_amount := qty[n] * v_price;
        v_total := v_total + v_amount;
        INSERT INTO tpcc.order_line
        VALUES (p_w, p_d, v_o_id, n, items[n], supply[n], NULL, qty[n], v_amount, v_dist);
    END LOOP;
    RETURN v_total * (1 - v_discount) * (1 + v_w_tax + v_d_tax);
END $$;

-- Payment (2.5): 60% by last name, 15% for a customer of another warehouse.
CREATE FUNCTION tpcc.payment(p_w int, p_d int, p_c_w int, p_c_d int, p_c int,
                             p_by_name boolean, p_last_n int, p_amount numeric)
RETURNS numeric
LANGUAGE plpgsql AS $$
DECLARE
    v_w_name text;
    v_d_name text;
    v_c int := p_c;
    v_balance numeric;
BEGIN
    UPDATE tpcc.warehouse SET w_ytd = w_ytd + p_amount
    WHERE w_id = p_w RETURNING w_name INTO v_w_name;
    UPDATE tpcc.district SET d_ytd = d_ytd + p_amount
    WHERE d_w_id = p_w AND d_id = p_d RETURNING d_name INTO v_d_name;
    IF p_by_name THEN
        v_c := tpcc.customer_by_name(p_c_w, p_c_d, p_last_n);
    END IF;
    UPDATE tpcc.customer
    SET c_balance = c_balance - p_amount,
        c_ytd_payment = c_ytd_payment + p_amount,
        c_payment_cnt = c_payment_cnt + 1,
        c_data = CASE WHEN c_credit = 'BC'
                      THEN left(concat_ws(' ', c_id, c_d_id, c_w_id, p_d, p_w, p_amount)
                                || '|' || c_data, 500)
                      ELSE c_data END
    WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c
    RETURNING c_balance INTO v_balance;
    INSERT INTO tpcc.history
    VALUES (v_c, p_c_d, p_c_w, p_d, p_w, localtimestamp, p_amount,
            v_w_name || '    ' || v_d_name);
    RETURN v_balance;
END $$;

-- Order-Status (2.6): the customer's last order and its lines; read-only.
CREATE FUNCTION tpcc.order_status(p_w int, p_d int, p_c int, p_by_name boolean, p_last_n int)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_c int := p_c;
    v_balance numeric;
    v_first text;
    v_middle text;
    v_last text;
    v_o_id int;
    v_entry timestamp;
    v_carrier int;
    v_lines int;
BEGIN
    IF p_by_name THEN
        v_c := tpcc.customer_by_name(p_w, p_d, p_last_n);
    END IF;
    SELECT c_balance, c_first, c_middle, c_last INTO v_balance, v_first, v_middle, v_last
    FROM tpcc.customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
    SELECT o_id, o_entry_d, o_carrier_id INTO v_o_id, v_entry, v_carrier
    FROM tpcc.orders WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c
    ORDER BY o_id DESC LIMIT 1;
    SELECT count(*) INTO v_lines FROM (
        SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
        FROM tpcc.order_line WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o_id
    ) AS l;
    RETURN v_lines;
END $$;

-- Delivery (2.7): the oldest undelivered order of each of the 10 districts.
-- FOR UPDATE under LIMIT 1 waits for a concurrent Delivery and then takes the
-- next oldest, so new orders stay contiguous (consistency condition 3).
CREATE FUNCTION tpcc.delivery(p_w int, p_carrier int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_o_id int;
    v_c int;
    v_amount numeric;
    delivered int := 0;
BEGIN
    FOR d IN 1 .. 10 LOOP
        SELECT no_o_id INTO v_o_id FROM tpcc.new_order
        WHERE no_w_id = p_w AND no_d_id = d
        ORDER BY no_o_id LIMIT 1 FOR UPDATE;
        CONTINUE WHEN NOT FOUND;  -- skipped, as 2.7.4.2 allows
        DELETE FROM tpcc.new_order WHERE no_w_id = p_w AND no_d_id = d AND no_o_id = v_o_id;
        UPDATE tpcc.orders SET o_carrier_id = p_carrier
        WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o_id RETURNING o_c_id INTO v_c;
        WITH l AS (
            UPDATE tpcc.order_line SET ol_delivery_d = localtimestamp
            WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o_id
            RETURNING ol_amount
        )
        SELECT sum(ol_amount) INTO v_amount FROM l;
        UPDATE tpcc.customer
        SET c_balance = c_balance + v_amount, c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
        delivered := delivered + 1;
    END LOOP;
    RETURN delivered;
END $$;

-- Stock-Level (2.8): distinct items of the district's last 20 orders below the threshold.
CREATE FUNCTION tpcc.stock_level(p_w int, p_d int, p_threshold int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_next int;
    v_low int;
BEGIN
    SELECT d_next_o_id INTO v_next FROM tpcc.district WHERE d_w_id = p_w AND d_id = p_d;
    SELECT count(DISTINCT s_i_id) INTO v_low
    FROM tpcc.order_line JOIN tpcc.stock ON s_w_id = p_w AND s_i_id = ol_i_id
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id >= v_next - 20 AND ol_o_id < v_next
      AND s_quantity < p_threshold;
    RETURN v_low;
END $$;
