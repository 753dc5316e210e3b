-- The rows of one table whose balance is not the sum of their history rows.
SELECT x.{key}, x.balance, coalesce(h.s, 0) FROM {prefix}{table} x
LEFT JOIN (SELECT {key}, sum(delta) s FROM {prefix}history GROUP BY {key}) h USING ({key})
WHERE x.balance <> coalesce(h.s, 0)
ORDER BY x.{key}
