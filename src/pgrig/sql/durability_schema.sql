-- The durability check's tables, balances at 0. pgrig.durability.clients fills
-- in the table prefix and the rows per branch, then the number of branches
-- (text, not a bound parameter: this runs as one script of many statements).
DROP TABLE IF EXISTS {tables};
CREATE TABLE {prefix}branches (bid int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0);
CREATE TABLE {prefix}tellers (
    tid int PRIMARY KEY, bid int NOT NULL, balance bigint NOT NULL DEFAULT 0);
CREATE TABLE {prefix}accounts (
    aid int PRIMARY KEY, bid int NOT NULL, balance bigint NOT NULL DEFAULT 0);
CREATE TABLE {prefix}history (
    id bigint PRIMARY KEY, aid int NOT NULL, tid int NOT NULL, bid int NOT NULL,
    delta int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO {prefix}branches (bid) SELECT g FROM generate_series(1, %(branches)s) g;
INSERT INTO {prefix}tellers (tid, bid)
    SELECT g, (g - 1) / {tellers_per_branch} + 1
    FROM generate_series(1, %(branches)s * {tellers_per_branch}) g;
INSERT INTO {prefix}accounts (aid, bid)
    SELECT g, (g - 1) / {accounts_per_branch} + 1
    FROM generate_series(1, %(branches)s * {accounts_per_branch}) g;
