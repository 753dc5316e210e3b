"""The durability check: crash the server under a write load and prove that no
commit it acknowledged was lost.

* ``clients``: client threads running short TPC-B style write transactions and
  the client-side ledger of every acknowledged commit;
* ``crasher``: the crash methods and waiting for the server to come back;
* ``verifier``: what is checked after every recovery and at the end;
* ``driver``: load, crash, recover, verify - K times;
* ``workload``: the campaign workload (``type = "durability"``) and its spec;
* ``report``: its report section;
* the ``pgrig durability`` front door, a one-target campaign of this workload,
  is ``pgrig.commands.durability`` (and ``durability_study``).
"""
