-- Stock-Level (clause 2.8), client-side: one round trip per statement.
\set w_id random(1, :active)
\set d_id random(1, 10)
\set threshold random(10, 20)
BEGIN;
SELECT d_next_o_id FROM tpcc.district WHERE d_w_id = :w_id AND d_id = :d_id \gset
SELECT count(DISTINCT s_i_id) FROM tpcc.order_line JOIN tpcc.stock ON s_w_id = :w_id AND s_i_id = ol_i_id WHERE ol_w_id = :w_id AND ol_d_id = :d_id AND ol_o_id >= :d_next_o_id::int - 20 AND ol_o_id < :d_next_o_id AND s_quantity < :threshold;
COMMIT;
