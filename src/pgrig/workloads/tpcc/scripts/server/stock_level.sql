-- Stock-Level (clause 2.8), server-side.
\set w_id random(1, :active)
\set d_id random(1, 10)
\set threshold random(10, 20)
SELECT tpcc.stock_level(:w_id, :d_id, :threshold);
