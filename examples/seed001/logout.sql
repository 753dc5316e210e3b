\set userid random(1, :users)
SELECT f_user_logout(:userid);
