-- The four sums that are equal after any number of whole transactions.
SELECT (SELECT coalesce(sum(balance), 0) FROM {prefix}accounts),
       (SELECT coalesce(sum(balance), 0) FROM {prefix}tellers),
       (SELECT coalesce(sum(balance), 0) FROM {prefix}branches),
       (SELECT coalesce(sum(delta), 0) FROM {prefix}history)
