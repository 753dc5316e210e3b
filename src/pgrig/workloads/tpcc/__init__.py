"""TPC-C: schema and population per the specification, a fast in-server loader,
the five transactions as PL/pgSQL functions (server-side mode) or as plain
statements (client-side mode) driven by pgbench, and the consistency checks.

Modules: ``model`` (results), ``sqlfiles`` (the SQL and pgbench scripts),
``loader``, ``driver`` (pgbench runs and their parsing), ``checks`` and ``steps``
(a study's steps); ``pgrig tpcc`` is ``pgrig.commands.tpcc``.
"""

SCHEMA = "tpcc"
TABLES = (
    "warehouse",
    "district",
    "customer",
    "history",
    "orders",
    "new_order",
    "order_line",
    "item",
    "stock",
)
