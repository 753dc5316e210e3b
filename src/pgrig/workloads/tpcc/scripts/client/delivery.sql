-- Delivery (clause 2.7), client-side: one round trip per statement, 10 districts.
\set w_id random(1, :active)
\set carrier random(1, 10)
BEGIN;
--@repeat 1 10
SELECT count(*) AS found, coalesce(max(no_o_id), 0) AS o_id FROM (SELECT no_o_id FROM tpcc.new_order WHERE no_w_id = :w_id AND no_d_id = @N ORDER BY no_o_id LIMIT 1 FOR UPDATE) AS oldest \gset
\if :found
DELETE FROM tpcc.new_order WHERE no_w_id = :w_id AND no_d_id = @N AND no_o_id = :o_id;
UPDATE tpcc.orders SET o_carrier_id = :carrier WHERE o_w_id = :w_id AND o_d_id = @N AND o_id = :o_id RETURNING o_c_id \gset
UPDATE tpcc.order_line SET ol_delivery_d = localtimestamp WHERE ol_w_id = :w_id AND ol_d_id = @N AND ol_o_id = :o_id;
SELECT sum(ol_amount) AS amount FROM tpcc.order_line WHERE ol_w_id = :w_id AND ol_d_id = @N AND ol_o_id = :o_id \gset
UPDATE tpcc.customer SET c_balance = c_balance + :amount::numeric, c_delivery_cnt = c_delivery_cnt + 1 WHERE c_w_id = :w_id AND c_d_id = @N AND c_id = :o_c_id;
\endif
--@end
COMMIT;
