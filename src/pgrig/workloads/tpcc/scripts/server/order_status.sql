-- Order-Status (clause 2.6), server-side.
\set w_id random(1, :active)
\set d_id random(1, 10)
\set by_name random(1, 100) <= 60
\set c_id ((random(0, 1023) | random(1, 3000)) + :k_c_id) % 3000 + 1
\set last_n ((random(0, 255) | random(0, 999)) + :k_c_last) % 1000
SELECT tpcc.order_status(:w_id, :d_id, :c_id, :by_name, :last_n);
