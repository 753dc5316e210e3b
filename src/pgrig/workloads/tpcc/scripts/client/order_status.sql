-- Order-Status (clause 2.6), client-side: one round trip per statement.
\set w_id random(1, :active)
\set d_id random(1, 10)
\set by_name random(1, 100) <= 60
\set c_id ((random(0, 1023) | random(1, 3000)) + :k_c_id) % 3000 + 1
\set last_n ((random(0, 255) | random(0, 999)) + :k_c_last) % 1000
BEGIN;
\if :by_name
SELECT c_id FROM tpcc.customer WHERE c_w_id = :w_id AND c_d_id = :d_id AND c_last = tpcc.last_name(:last_n) ORDER BY c_first OFFSET (SELECT (count(*) - 1) / 2 FROM tpcc.customer WHERE c_w_id = :w_id AND c_d_id = :d_id AND c_last = tpcc.last_name(:last_n)) LIMIT 1 \gset
\endif
SELECT c_balance, c_first, c_middle, c_last FROM tpcc.customer WHERE c_w_id = :w_id AND c_d_id = :d_id AND c_id = :c_id;
SELECT o_id, o_entry_d, o_carrier_id FROM tpcc.orders WHERE o_w_id = :w_id AND o_d_id = :d_id AND o_c_id = :c_id ORDER BY o_id DESC LIMIT 1 \gset
SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM tpcc.order_line WHERE ol_w_id = :w_id AND ol_d_id = :d_id AND ol_o_id = :o_id;
COMMIT;
