-- New-Order (clause 2.4), server-side: the PL/pgSQL function does the work.
\set w_id random(1, :active)
\set d_id random(1, 10)
\set c_id ((random(0, 1023) | random(1, 3000)) + :k_c_id) % 3000 + 1
\set ol_cnt random(5, 15)
\set rbk random(1, 100) = 1
SELECT tpcc.new_order(:w_id, :d_id, :c_id, :ol_cnt, :rbk, :k_ol_i_id, :active);
