"""The write load: N client threads, each on its own connection, running short
TPC-B style transactions, and the ledger of what the server acknowledged.

Every transaction is one autocommit statement, so its answer *is* the commit
acknowledgement: it inserts a history row whose id the client chose (unique
for the whole run) and moves ``delta`` into one account, one teller and one
branch. Balances start at 0, so after any number of whole transactions
sum(accounts) = sum(tellers) = sum(branches) = sum(history.delta), and every
single balance equals the sum of its history rows. ``delta`` is a function of
the id, so a history row whose content changed is recognisable too.

A client appends (id, acknowledgement time) to its ledger before it starts the
next transaction. A transaction whose connection broke before the answer came
is *in doubt*: it may or may not have committed, and counts as neither.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import dataclass, field

import psycopg

from pgrig.conninfo import Conn
from pgrig.sql import load as load_sql

APPLICATION_NAME = "pgrig-durability"
PREFIX = "pgrig_dur_"
TABLES = tuple(f"{PREFIX}{t}" for t in ("history", "accounts", "tellers", "branches"))
TELLERS_PER_BRANCH = 10
ACCOUNTS_PER_BRANCH = 1000
ID_BASE = 10**12  # client c (1-based) uses ids c * ID_BASE + sequence number
DELTA_MOD = 10007

SCHEMA = load_sql("durability_schema").format(
    prefix=PREFIX,
    tables=", ".join(TABLES),
    tellers_per_branch=TELLERS_PER_BRANCH,
    accounts_per_branch=ACCOUNTS_PER_BRANCH,
)

# One statement, one round trip; the tables are updated in the same order by
# every client (accounts, tellers, branches), so clients never deadlock.
TRANSACTION = load_sql("durability_transaction").format(prefix=PREFIX)


def delta_of(row_id: int) -> int:
    """The delta a client writes for ``row_id``; SQL twin: ``delta_sql``."""
    return (row_id % DELTA_MOD) * 7919 % DELTA_MOD - DELTA_MOD // 2


def delta_sql(column: str) -> str:
    return f"(({column} % {DELTA_MOD}) * 7919 % {DELTA_MOD} - {DELTA_MOD // 2})"


def create_schema(conn: Conn, branches: int) -> None:
    with conn.connect() as db:
        db.execute(SCHEMA.replace("%(branches)s", str(int(branches))))
        db.execute("CHECKPOINT")


@dataclass
class Ledger:
    """One client's record. Only its own thread appends; the driver reads it while
    every client is parked at the gate."""

    client: int
    ids: list[int] = field(default_factory=list)  # acknowledged, in order
    acked_at: list[float] = field(default_factory=list)  # time.time() of each answer
    in_doubt: list[int] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)  # answered with an error: rolled back
    errors: list[str] = field(default_factory=list)  # first few error messages
    backend_pid: int | None = None


class Gate:
    """Lets clients run while open; the driver closes it around a crash and
    waits until every client is parked (so the ledgers are complete)."""

    def __init__(self, clients: int) -> None:
        self._cond = threading.Condition()
        self._open = False
        self._parked = 0
        self._clients = clients
        self.stopping = False
        # Bumped at every opening: a connection made before a crash is dead.
        self.generation = 0

    def open(self) -> None:
        with self._cond:
            self._open = True
            self.generation += 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._open = False

    def stop(self) -> None:
        with self._cond:
            self.stopping = True
            self._cond.notify_all()

    def wait_open(self) -> bool:
        """Park until open; False when the run is over."""
        with self._cond:
            if self._open or self.stopping:
                return not self.stopping
            self._parked += 1
            self._cond.notify_all()
            while not self._open and not self.stopping:
                self._cond.wait()
            self._parked -= 1
            return not self.stopping

    def wait_parked(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._parked < self._clients:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True


class Client(threading.Thread):
    def __init__(self, number: int, conn: Conn, branches: int, seed: int, gate: Gate) -> None:
        super().__init__(name=f"pgrig-durability-client-{number}", daemon=True)
        self.ledger = Ledger(number)
        self._conn = conn
        self._branches = branches
        self._rng = random.Random(seed * 1000 + number)
        self._gate = gate
        self._next_id = number * ID_BASE
        self.crashed: BaseException | None = None  # a bug in this thread, re-raised by the driver

    def run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - handed to the driver thread
            self.crashed = exc

    def _loop(self) -> None:
        db: psycopg.Connection | None = None
        generation = 0
        try:
            while self._gate.wait_open():
                if db is not None and generation != self._gate.generation:
                    with contextlib.suppress(psycopg.Error):
                        db.close()
                    db = None
                if db is None:
                    generation = self._gate.generation
                    db = self._connect()
                    if db is None:
                        time.sleep(0.02)
                        continue
                db = self._transaction(db)
        finally:
            if db is not None:
                with contextlib.suppress(psycopg.Error):
                    db.close()

    def _connect(self) -> psycopg.Connection | None:
        try:
            db = psycopg.connect(
                self._conn.conninfo(), autocommit=True, application_name=APPLICATION_NAME
            )
        except psycopg.Error:
            return None  # the server is down or still recovering: the gate will close
        self.ledger.backend_pid = db.info.backend_pid
        return db

    def _transaction(self, db: psycopg.Connection) -> psycopg.Connection | None:
        self._next_id += 1
        row_id = self._next_id
        bid = self._rng.randint(1, self._branches)
        params = {
            "id": row_id,
            "delta": delta_of(row_id),
            "bid": bid,
            "tid": (bid - 1) * TELLERS_PER_BRANCH + self._rng.randint(1, TELLERS_PER_BRANCH),
            "aid": (bid - 1) * ACCOUNTS_PER_BRANCH + self._rng.randint(1, ACCOUNTS_PER_BRANCH),
        }
        try:
            db.execute(TRANSACTION, params)
        except psycopg.Error as exc:
            if db.broken or db.closed:
                # No answer: the commit may or may not have happened.
                self.ledger.in_doubt.append(row_id)
                with contextlib.suppress(psycopg.Error):
                    db.close()
                return None
            self.ledger.rejected.append(row_id)
            if len(self.ledger.errors) < 5:
                self.ledger.errors.append(str(exc).strip().splitlines()[0])
            return db
        self.ledger.ids.append(row_id)
        self.ledger.acked_at.append(time.time())
        return db
