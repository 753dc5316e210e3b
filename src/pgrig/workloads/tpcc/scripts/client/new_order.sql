-- New-Order (clause 2.4), client-side: one round trip per statement.
-- Blocks between the repeat markers are written out once per line (sqlfiles.expand).
\set w_id random(1, :active)
\set d_id random(1, 10)
\set c_id ((random(0, 1023) | random(1, 3000)) + :k_c_id) % 3000 + 1
\set ol_cnt random(5, 15)
\set rbk random(1, 100) = 1
\set all_local 1
\set rolled_back 0
--@repeat 1 15
\set i_@N CASE WHEN :rbk AND @N = :ol_cnt THEN 100001 ELSE ((random(0, 8191) | random(1, 100000)) + :k_ol_i_id) % 100000 + 1 END
\set sw_@N CASE WHEN :active > 1 AND random(1, 100) = 1 THEN (:w_id + random(0, :active - 2)) % :active + 1 ELSE :w_id END
\set q_@N random(1, 10)
\set all_local CASE WHEN @N <= :ol_cnt AND :sw_@N <> :w_id THEN 0 ELSE :all_local END
--@end
BEGIN;
SELECT c_discount, c_last, c_credit, w_tax FROM tpcc.customer, tpcc.warehouse WHERE w_id = :w_id AND c_w_id = :w_id AND c_d_id = :d_id AND c_id = :c_id \gset
UPDATE tpcc.district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = :w_id AND d_id = :d_id RETURNING d_tax, d_next_o_id - 1 AS o_id \gset
INSERT INTO tpcc.orders VALUES (:w_id, :d_id, :o_id, :c_id, NULL, :ol_cnt, :all_local, localtimestamp);
INSERT INTO tpcc.new_order VALUES (:w_id, :d_id, :o_id);
--@repeat 1 15
\if @N <= :ol_cnt
SELECT count(*) AS found, min(i_price) AS i_price, min(i_name) AS i_name, min(i_data) AS i_data FROM tpcc.item WHERE i_id = :i_@N \gset
\if :found
UPDATE tpcc.stock SET s_quantity = CASE WHEN s_quantity >= :q_@N::int + 10 THEN s_quantity - :q_@N::int ELSE s_quantity - :q_@N::int + 91 END, s_ytd = s_ytd + :q_@N::int, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + CASE WHEN :sw_@N::int = :w_id::int THEN 0 ELSE 1 END WHERE s_w_id = :sw_@N AND s_i_id = :i_@N RETURNING s_data, (ARRAY[s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10])[:d_id::int] AS dist_info \gset
INSERT INTO tpcc.order_line VALUES (:w_id, :d_id, :o_id, @N, :i_@N, :sw_@N, NULL, :q_@N, :q_@N::int * :i_price::numeric, :dist_info);
\else
\set rolled_back 1
\endif
\endif
--@end
\if :rolled_back
ROLLBACK;
\else
COMMIT;
\endif
