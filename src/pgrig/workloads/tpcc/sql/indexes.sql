-- Built after the data, in parallel connections, largest first. Each statement
-- is one unit of work for the loader (statements are separated by ";").
CREATE UNIQUE INDEX order_line_pkey ON tpcc.order_line (ol_w_id, ol_d_id, ol_o_id, ol_number);
CREATE UNIQUE INDEX stock_pkey ON tpcc.stock (s_w_id, s_i_id);
CREATE UNIQUE INDEX customer_pkey ON tpcc.customer (c_w_id, c_d_id, c_id);
-- Payment and Order-Status by last name (clause 2.5.2.2, 2.6.2.2): customers of a
-- district with that C_LAST, sorted by C_FIRST.
CREATE INDEX customer_last_name ON tpcc.customer (c_w_id, c_d_id, c_last, c_first);
CREATE UNIQUE INDEX orders_pkey ON tpcc.orders (o_w_id, o_d_id, o_id);
-- Order-Status: the customer's most recent order.
CREATE UNIQUE INDEX orders_customer ON tpcc.orders (o_w_id, o_d_id, o_c_id, o_id);
CREATE UNIQUE INDEX new_order_pkey ON tpcc.new_order (no_w_id, no_d_id, no_o_id);
CREATE UNIQUE INDEX item_pkey ON tpcc.item (i_id);
CREATE UNIQUE INDEX district_pkey ON tpcc.district (d_w_id, d_id);
CREATE UNIQUE INDEX warehouse_pkey ON tpcc.warehouse (w_id)
