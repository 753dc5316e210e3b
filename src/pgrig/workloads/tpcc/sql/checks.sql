-- Consistency conditions of clause 3.3.2. Each query returns (offending, checked):
-- the rows that break the condition and the rows examined. A header line
-- "-- condition N: title" starts each query.

-- condition 1: W_YTD = sum(D_YTD) of the warehouse's districts
SELECT count(*) FILTER (WHERE w.w_ytd IS DISTINCT FROM d.ytd), count(*)
FROM tpcc.warehouse AS w
LEFT JOIN (SELECT d_w_id, sum(d_ytd) AS ytd FROM tpcc.district GROUP BY d_w_id) AS d
    ON d.d_w_id = w.w_id;

-- condition 2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) in each district
SELECT count(*) FILTER (WHERE d.d_next_o_id - 1 IS DISTINCT FROM o.max_o
                           OR (n.max_no IS NOT NULL AND n.max_no <> o.max_o)), count(*)
FROM tpcc.district AS d
LEFT JOIN (SELECT o_w_id, o_d_id, max(o_id) AS max_o FROM tpcc.orders GROUP BY 1, 2) AS o
    ON o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id
LEFT JOIN (SELECT no_w_id, no_d_id, max(no_o_id) AS max_no FROM tpcc.new_order GROUP BY 1, 2) AS n
    ON n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id;

-- condition 3: max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER, per district
SELECT count(*) FILTER (WHERE max_no - min_no + 1 <> n), count(*)
FROM (SELECT max(no_o_id) AS max_no, min(no_o_id) AS min_no, count(*) AS n
      FROM tpcc.new_order GROUP BY no_w_id, no_d_id) AS x;

-- condition 4: sum(O_OL_CNT) = rows in ORDER-LINE, per district
SELECT count(*) FILTER (WHERE o.lines IS DISTINCT FROM l.lines), count(*)
FROM (SELECT o_w_id, o_d_id, sum(o_ol_cnt) AS lines FROM tpcc.orders GROUP BY 1, 2) AS o
FULL JOIN (SELECT ol_w_id, ol_d_id, count(*) AS lines FROM tpcc.order_line GROUP BY 1, 2) AS l
    ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id;

-- condition 5: O_CARRIER_ID is null exactly for the orders that have a NEW-ORDER row
SELECT count(*) FILTER (WHERE o.o_id IS NULL OR (o.o_carrier_id IS NULL) <> (n.no_o_id IS NOT NULL)),
       count(*)
FROM tpcc.orders AS o
FULL JOIN tpcc.new_order AS n
    ON n.no_w_id = o.o_w_id AND n.no_d_id = o.o_d_id AND n.no_o_id = o.o_id;

-- condition 6: O_OL_CNT = the order's rows in ORDER-LINE, per order
SELECT count(*) FILTER (WHERE o.o_ol_cnt IS DISTINCT FROM l.lines), count(*)
FROM tpcc.orders AS o
FULL JOIN (SELECT ol_w_id, ol_d_id, ol_o_id, count(*) AS lines
           FROM tpcc.order_line GROUP BY 1, 2, 3) AS l
    ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id;

-- condition 7: OL_DELIVERY_D is null exactly when the order's O_CARRIER_ID is null
SELECT count(*) FILTER (WHERE o.o_id IS NULL
                           OR (l.ol_delivery_d IS NULL) <> (o.o_carrier_id IS NULL)), count(*)
FROM tpcc.order_line AS l
LEFT JOIN tpcc.orders AS o
    ON o.o_w_id = l.ol_w_id AND o.o_d_id = l.ol_d_id AND o.o_id = l.ol_o_id;

-- condition 8: W_YTD = sum(H_AMOUNT) of the warehouse's payments
SELECT count(*) FILTER (WHERE w.w_ytd IS DISTINCT FROM h.amount), count(*)
FROM tpcc.warehouse AS w
LEFT JOIN (SELECT h_w_id, sum(h_amount) AS amount FROM tpcc.history GROUP BY h_w_id) AS h
    ON h.h_w_id = w.w_id;

-- condition 9: D_YTD = sum(H_AMOUNT) of the district's payments
SELECT count(*) FILTER (WHERE d.d_ytd IS DISTINCT FROM h.amount), count(*)
FROM tpcc.district AS d
LEFT JOIN (SELECT h_w_id, h_d_id, sum(h_amount) AS amount FROM tpcc.history GROUP BY 1, 2) AS h
    ON h.h_w_id = d.d_w_id AND h.h_d_id = d.d_id;

-- condition 10: C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT), per customer
SELECT count(*) FILTER (WHERE c.c_balance <> coalesce(ol.amount, 0) - coalesce(h.amount, 0)),
       count(*)
FROM tpcc.customer AS c
LEFT JOIN (SELECT o_w_id, o_d_id, o_c_id, sum(ol_amount) AS amount
           FROM tpcc.orders
           JOIN tpcc.order_line ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id
           WHERE ol_delivery_d IS NOT NULL
           GROUP BY 1, 2, 3) AS ol
    ON ol.o_w_id = c.c_w_id AND ol.o_d_id = c.c_d_id AND ol.o_c_id = c.c_id
LEFT JOIN (SELECT h_c_w_id, h_c_d_id, h_c_id, sum(h_amount) AS amount
           FROM tpcc.history GROUP BY 1, 2, 3) AS h
    ON h.h_c_w_id = c.c_w_id AND h.h_c_d_id = c.c_d_id AND h.h_c_id = c.c_id;

-- condition 11: rows in ORDER - rows in NEW-ORDER = 2100, per district (right after the load)
SELECT count(*) FILTER (WHERE coalesce(o.n, 0) - coalesce(n.n, 0) <> 2100), count(*)
FROM tpcc.district AS d
LEFT JOIN (SELECT o_w_id, o_d_id, count(*) AS n FROM tpcc.orders GROUP BY 1, 2) AS o
    ON o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id
LEFT JOIN (SELECT no_w_id, no_d_id, count(*) AS n FROM tpcc.new_order GROUP BY 1, 2) AS n
    ON n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id;

-- condition 12: C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT), per customer
SELECT count(*) FILTER (WHERE c.c_balance + c.c_ytd_payment <> coalesce(ol.amount, 0)), count(*)
FROM tpcc.customer AS c
LEFT JOIN (SELECT o_w_id, o_d_id, o_c_id, sum(ol_amount) AS amount
           FROM tpcc.orders
           JOIN tpcc.order_line ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id
           WHERE ol_delivery_d IS NOT NULL
           GROUP BY 1, 2, 3) AS ol
    ON ol.o_w_id = c.c_w_id AND ol.o_d_id = c.c_d_id AND ol.o_c_id = c.c_id;
