-- Payment (clause 2.5), client-side: one round trip per statement.
\set w_id random(1, :active)
\set d_id random(1, 10)
\set remote :active > 1 and random(1, 100) <= 15
\if :remote
\set c_w_id (:w_id + random(0, :active - 2)) % :active + 1
\set c_d_id random(1, 10)
\else
\set c_w_id :w_id
\set c_d_id :d_id
\endif
\set by_name random(1, 100) <= 60
\set c_id ((random(0, 1023) | random(1, 3000)) + :k_c_id) % 3000 + 1
\set last_n ((random(0, 255) | random(0, 999)) + :k_c_last) % 1000
\set cents random(100, 500000)
BEGIN;
UPDATE tpcc.warehouse SET w_ytd = w_ytd + :cents::int / 100.0 WHERE w_id = :w_id RETURNING w_name \gset
UPDATE tpcc.district SET d_ytd = d_ytd + :cents::int / 100.0 WHERE d_w_id = :w_id AND d_id = :d_id RETURNING d_name \gset
\if :by_name
SELECT c_id FROM tpcc.customer WHERE c_w_id = :c_w_id AND c_d_id = :c_d_id AND c_last = tpcc.last_name(:last_n) ORDER BY c_first OFFSET (SELECT (count(*) - 1) / 2 FROM tpcc.customer WHERE c_w_id = :c_w_id AND c_d_id = :c_d_id AND c_last = tpcc.last_name(:last_n)) LIMIT 1 \gset
\endif
UPDATE tpcc.customer SET c_balance = c_balance - :cents::int / 100.0, c_ytd_payment = c_ytd_payment + :cents::int / 100.0, c_payment_cnt = c_payment_cnt + 1, c_data = CASE WHEN c_credit = 'BC' THEN left(concat_ws(' ', c_id, c_d_id, c_w_id, :d_id::int, :w_id::int, :cents::int / 100.0) || '|' || c_data, 500) ELSE c_data END WHERE c_w_id = :c_w_id AND c_d_id = :c_d_id AND c_id = :c_id RETURNING c_first, c_middle, c_last, c_balance, c_credit \gset
INSERT INTO tpcc.history VALUES (:c_id, :c_d_id, :c_w_id, :d_id, :w_id, localtimestamp, :cents::int / 100.0, :w_name::text || '    ' || :d_name::text);
COMMIT;
