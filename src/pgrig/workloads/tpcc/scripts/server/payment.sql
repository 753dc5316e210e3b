-- Payment (clause 2.5), server-side.
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
SELECT tpcc.payment(:w_id, :d_id, :c_w_id, :c_d_id, :c_id, :by_name, :last_n, :cents / 100.0);
