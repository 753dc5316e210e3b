-- Delivery (clause 2.7), server-side: all 10 districts in one call.
\set w_id random(1, :active)
\set carrier random(1, 10)
SELECT tpcc.delivery(:w_id, :carrier);
