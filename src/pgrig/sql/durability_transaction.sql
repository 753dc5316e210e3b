WITH a AS (UPDATE {prefix}accounts SET balance = balance + %(delta)s WHERE aid = %(aid)s),
     t AS (UPDATE {prefix}tellers SET balance = balance + %(delta)s WHERE tid = %(tid)s),
     b AS (UPDATE {prefix}branches SET balance = balance + %(delta)s WHERE bid = %(bid)s)
INSERT INTO {prefix}history (id, aid, tid, bid, delta)
VALUES (%(id)s, %(aid)s, %(tid)s, %(bid)s, %(delta)s)
