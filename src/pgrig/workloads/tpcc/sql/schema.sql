-- TPC-C tables (clause 1.3), in their own schema so that dropping it removes
-- exactly what pgrig created. No index, key or constraint yet: the loader adds
-- them after the data (indexes.sql). Column types follow the specification's
-- sizes; money is numeric, as the specification's fixed-point amounts.
DROP SCHEMA IF EXISTS tpcc CASCADE;
CREATE SCHEMA tpcc;

-- What was loaded: `pgrig tpcc run` and `check` refuse a schema without this row.
CREATE TABLE tpcc.meta (
    warehouses   int NOT NULL,
    c_last_load  int NOT NULL,  -- constant C of NURand(255, 0, 999) for C_LAST at load
    c_id         int NOT NULL,  -- constant C of NURand(1023, 1, 3000) for C_ID
    ol_i_id      int NOT NULL,  -- constant C of NURand(8191, 1, 100000) for OL_I_ID
    loaded_at    timestamptz NOT NULL DEFAULT now(),
    load_seconds float8,
    load_bytes   bigint,  -- tables and indexes right after the load: the runs' active share
    runs         int NOT NULL DEFAULT 0  -- timed runs since the load (condition 11)
);

-- Small, updated by every Payment: room for HOT updates on the same page.
CREATE TABLE tpcc.warehouse (
    w_id       int NOT NULL,
    w_ytd      numeric(12, 2) NOT NULL,
    w_tax      numeric(4, 4) NOT NULL,
    w_name     varchar(10) NOT NULL,
    w_street_1 varchar(20) NOT NULL,
    w_street_2 varchar(20) NOT NULL,
    w_city     varchar(20) NOT NULL,
    w_state    char(2) NOT NULL,
    w_zip      char(9) NOT NULL
) WITH (fillfactor = 10);

CREATE TABLE tpcc.district (
    d_w_id      int NOT NULL,
    d_id        int NOT NULL,
    d_ytd       numeric(12, 2) NOT NULL,
    d_tax       numeric(4, 4) NOT NULL,
    d_next_o_id int NOT NULL,
    d_name      varchar(10) NOT NULL,
    d_street_1  varchar(20) NOT NULL,
    d_street_2  varchar(20) NOT NULL,
    d_city      varchar(20) NOT NULL,
    d_state     char(2) NOT NULL,
    d_zip       char(9) NOT NULL
) WITH (fillfactor = 10);

CREATE TABLE tpcc.customer (
    c_w_id         int NOT NULL,
    c_d_id         int NOT NULL,
    c_id           int NOT NULL,
    c_discount     numeric(4, 4) NOT NULL,
    c_credit       char(2) NOT NULL,
    c_last         varchar(16) NOT NULL,
    c_first        varchar(16) NOT NULL,
    c_credit_lim   numeric(12, 2) NOT NULL,
    c_balance      numeric(12, 2) NOT NULL,
    c_ytd_payment  numeric(12, 2) NOT NULL,
    c_payment_cnt  int NOT NULL,
    c_delivery_cnt int NOT NULL,
    c_street_1     varchar(20) NOT NULL,
    c_street_2     varchar(20) NOT NULL,
    c_city         varchar(20) NOT NULL,
    c_state        char(2) NOT NULL,
    c_zip          char(9) NOT NULL,
    c_phone        char(16) NOT NULL,
    c_since        timestamp NOT NULL,
    c_middle       char(2) NOT NULL,
    c_data         varchar(500) NOT NULL
);

CREATE TABLE tpcc.history (
    h_c_id   int NOT NULL,
    h_c_d_id int NOT NULL,
    h_c_w_id int NOT NULL,
    h_d_id   int NOT NULL,
    h_w_id   int NOT NULL,
    h_date   timestamp NOT NULL,
    h_amount numeric(6, 2) NOT NULL,
    h_data   varchar(24) NOT NULL
);

CREATE TABLE tpcc.orders (
    o_w_id       int NOT NULL,
    o_d_id       int NOT NULL,
    o_id         int NOT NULL,
    o_c_id       int NOT NULL,
    o_carrier_id int,
    o_ol_cnt     int NOT NULL,
    o_all_local  int NOT NULL,
    o_entry_d    timestamp NOT NULL
);

CREATE TABLE tpcc.new_order (
    no_w_id int NOT NULL,
    no_d_id int NOT NULL,
    no_o_id int NOT NULL
);

CREATE TABLE tpcc.order_line (
    ol_w_id        int NOT NULL,
    ol_d_id        int NOT NULL,
    ol_o_id        int NOT NULL,
    ol_number      int NOT NULL,
    ol_i_id        int NOT NULL,
    ol_supply_w_id int NOT NULL,
    ol_delivery_d  timestamp,
    ol_quantity    int NOT NULL,
    ol_amount      numeric(6, 2) NOT NULL,
    ol_dist_info   char(24) NOT NULL
);

CREATE TABLE tpcc.item (
    i_id    int NOT NULL,
    i_im_id int NOT NULL,
    i_name  varchar(24) NOT NULL,
    i_price numeric(5, 2) NOT NULL,
    i_data  varchar(50) NOT NULL
);

CREATE TABLE tpcc.stock (
    s_w_id       int NOT NULL,
    s_i_id       int NOT NULL,
    s_quantity   int NOT NULL,
    s_ytd        int NOT NULL,
    s_order_cnt  int NOT NULL,
    s_remote_cnt int NOT NULL,
    s_data       varchar(50) NOT NULL,
    s_dist_01    char(24) NOT NULL,
    s_dist_02    char(24) NOT NULL,
    s_dist_03    char(24) NOT NULL,
    s_dist_04    char(24) NOT NULL,
    s_dist_05    char(24) NOT NULL,
    s_dist_06    char(24) NOT NULL,
    s_dist_07    char(24) NOT NULL,
    s_dist_08    char(24) NOT NULL,
    s_dist_09    char(24) NOT NULL,
    s_dist_10    char(24) NOT NULL
);

-- No statistics for payload columns that no transaction filters, joins or sorts
-- on: ANALYZE right after the load skips them (it spent most of its time on
-- stock's ten S_DIST columns), and no plan can change for lack of them.
ALTER TABLE tpcc.stock
    ALTER s_data SET STATISTICS 0,
    ALTER s_dist_01 SET STATISTICS 0, ALTER s_dist_02 SET STATISTICS 0,
    ALTER s_dist_03 SET STATISTICS 0, ALTER s_dist_04 SET STATISTICS 0,
    ALTER s_dist_05 SET STATISTICS 0, ALTER s_dist_06 SET STATISTICS 0,
    ALTER s_dist_07 SET STATISTICS 0, ALTER s_dist_08 SET STATISTICS 0,
    ALTER s_dist_09 SET STATISTICS 0, ALTER s_dist_10 SET STATISTICS 0;
ALTER TABLE tpcc.customer
    ALTER c_data SET STATISTICS 0, ALTER c_street_1 SET STATISTICS 0,
    ALTER c_street_2 SET STATISTICS 0, ALTER c_city SET STATISTICS 0,
    ALTER c_state SET STATISTICS 0, ALTER c_zip SET STATISTICS 0,
    ALTER c_phone SET STATISTICS 0, ALTER c_middle SET STATISTICS 0;
ALTER TABLE tpcc.order_line ALTER ol_dist_info SET STATISTICS 0;
ALTER TABLE tpcc.history ALTER h_data SET STATISTICS 0;
ALTER TABLE tpcc.item ALTER i_data SET STATISTICS 0, ALTER i_name SET STATISTICS 0;
