-- Primary keys from the unique indexes just built: catalog changes only.
ALTER TABLE tpcc.warehouse ADD PRIMARY KEY USING INDEX warehouse_pkey;
ALTER TABLE tpcc.district ADD PRIMARY KEY USING INDEX district_pkey;
ALTER TABLE tpcc.customer ADD PRIMARY KEY USING INDEX customer_pkey;
ALTER TABLE tpcc.orders ADD PRIMARY KEY USING INDEX orders_pkey;
ALTER TABLE tpcc.new_order ADD PRIMARY KEY USING INDEX new_order_pkey;
ALTER TABLE tpcc.order_line ADD PRIMARY KEY USING INDEX order_line_pkey;
ALTER TABLE tpcc.item ADD PRIMARY KEY USING INDEX item_pkey;
ALTER TABLE tpcc.stock ADD PRIMARY KEY USING INDEX stock_pkey;
