"""The rows of the TPC-C tables (clause 4.3.3.1), as binary COPY blocks built by
numpy: one warehouse's rows of a table per call (stock in blocks of items).

Orders and their lines load in different connections; each derives the
warehouse's O_OL_CNT from a generator seeded by the load's seed and the
warehouse, so the two agree without sharing memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import numpy as np
import numpy.typing as npt

from pgrig.workloads.copybin import Field, Generator, fixed_text, fraction, int4, money, rows
from pgrig.workloads.copybin import timestamp as ts

ITEMS = 100_000
DISTRICTS = 10
CUSTOMERS = 3_000  # per district, and orders per district
UNDELIVERED_FROM = 2_101  # orders 2,101..3,000 of a district are new orders
STOCK_BLOCK = 25_000  # items per block of stock rows: about 9 MB
SYLLABLES = (
    b"BAR",
    b"OUGHT",
    b"ABLE",
    b"PRI",
    b"PRES",
    b"ESE",
    b"ANTI",
    b"CALLY",
    b"ATION",
    b"EING",
)


def _last_names() -> Field:
    """C_LAST for 0..999: three syllables (4.3.2.3), in a 15-byte slot each."""
    names = [SYLLABLES[n // 100] + SYLLABLES[n // 10 % 10] + SYLLABLES[n % 10] for n in range(1000)]
    values = np.zeros((1000, 15), dtype=np.uint8)
    for i, name in enumerate(names):
        values[i, : len(name)] = np.frombuffer(name, np.uint8)
    return Field(values, np.array([len(n) for n in names], dtype=np.int64))


LAST_NAMES = _last_names()


def _zip(g: Generator, n: int) -> Field:
    """Four random digits and "11111" (4.3.2.7)."""
    values = np.empty((n, 9), dtype=np.uint8)
    values[:, :4] = g.text(4, 4, n, "digits").values
    values[:, 4:] = np.frombuffer(b"11111", np.uint8)
    return Field(values)


def _address(g: Generator, n: int) -> list[Field]:
    """Street 1, street 2, city, state, zip (4.3.2.7)."""
    return [g.text(10, 20, n), g.text(10, 20, n), g.text(10, 20, n), g.text(2, 2, n), _zip(g, n)]


def items(g: Generator) -> bytes:
    n = ITEMS
    return rows(
        [
            int4(np.arange(1, n + 1), n),
            int4(g.ints(1, 10_000, n), n),
            g.text(14, 24, n),
            money(g.ints(100, 10_000, n), n),
            g.original(g.text(26, 50, n)),
        ]
    )


def warehouses(g: Generator, first: int, last: int) -> bytes:
    n = last - first + 1
    return rows(
        [
            int4(np.arange(first, last + 1), n),
            money(30_000_000, n),
            fraction(g.ints(0, 2_000, n), n),
            g.text(6, 10, n),
            *_address(g, n),
        ]
    )


def districts(g: Generator, first: int, last: int) -> bytes:
    n = (last - first + 1) * DISTRICTS
    return rows(
        [
            int4(np.repeat(np.arange(first, last + 1), DISTRICTS), n),
            int4(np.tile(np.arange(1, DISTRICTS + 1), last - first + 1), n),
            money(3_000_000, n),
            fraction(g.ints(0, 2_000, n), n),
            int4(CUSTOMERS + 1, n),
            g.text(6, 10, n),
            *_address(g, n),
        ]
    )


def stock(g: Generator, w: int) -> Iterator[bytes]:
    for first in range(1, ITEMS + 1, STOCK_BLOCK):
        n = min(STOCK_BLOCK, ITEMS - first + 1)
        yield rows(
            [
                int4(w, n),
                int4(np.arange(first, first + n), n),
                int4(g.ints(10, 100, n), n),
                int4(0, n),
                int4(0, n),
                int4(0, n),
                g.original(g.text(26, 50, n)),
                *(g.text(24, 24, n) for _ in range(10)),
            ]
        )


def _district_customer() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """D_ID and C_ID (or O_ID) of a warehouse's 30,000 customers (or orders)."""
    d = np.repeat(np.arange(1, DISTRICTS + 1), CUSTOMERS)
    return d, np.tile(np.arange(1, CUSTOMERS + 1), DISTRICTS)


def customers(g: Generator, w: int, c_last: int, now: datetime) -> bytes:
    d, c = _district_customer()
    n = len(c)
    # C_LAST: 0..999 in order for a district's first 1,000 customers, then
    # NURand(255, 0, 999) with the load's constant C (4.3.3.1, 2.1.6).
    nurand = ((g.ints(0, 255, n) | g.ints(0, 999, n)) + c_last) % 1000
    last = np.where(c <= 1000, c - 1, nurand)
    bad = g.rng.random(n) < 0.1
    credit = np.where(bad[:, None], np.frombuffer(b"BC", np.uint8), np.frombuffer(b"GC", np.uint8))
    return rows(
        [
            int4(w, n),
            int4(d, n),
            int4(c, n),
            fraction(g.ints(0, 5_000, n), n),
            Field(credit),
            Field(LAST_NAMES.values[last], LAST_NAMES.lengths[last]),  # type: ignore[index]
            g.text(8, 16, n),
            money(5_000_000, n),
            money(-1_000, n),
            money(1_000, n),
            int4(1, n),
            int4(0, n),
            *_address(g, n),
            g.text(16, 16, n, "digits"),
            ts(now, n),
            fixed_text(b"OE", n),
            g.text(300, 500, n),
        ]
    )


def history(g: Generator, w: int, now: datetime) -> bytes:
    d, c = _district_customer()
    n = len(c)
    return rows(
        [
            int4(c, n),
            int4(d, n),
            int4(w, n),
            int4(d, n),
            int4(w, n),
            ts(now, n),
            money(1_000, n),
            g.text(12, 24, n),
        ]
    )


def line_counts(seed: int, w: int) -> npt.NDArray[np.int64]:
    """O_OL_CNT (5..15) of a warehouse's orders, the same for both callers."""
    return np.random.default_rng([seed, w]).integers(5, 16, DISTRICTS * CUSTOMERS)


def orders(g: Generator, w: int, seed: int, now: datetime) -> bytes:
    d, o = _district_customer()
    n = len(o)
    # O_C_ID: a random permutation of the customers, per district.
    customer = np.argsort(g.rng.random((DISTRICTS, CUSTOMERS)), axis=1).ravel() + 1
    return rows(
        [
            int4(w, n),
            int4(d, n),
            int4(o, n),
            int4(customer, n),
            Field(g.ints(1, 10, n).astype(">i4"), null=o >= UNDELIVERED_FROM),
            int4(line_counts(seed, w), n),
            int4(1, n),
            ts(now, n),
        ]
    )


def new_orders(w: int) -> bytes:
    per = CUSTOMERS - UNDELIVERED_FROM + 1
    n = DISTRICTS * per
    return rows(
        [
            int4(w, n),
            int4(np.repeat(np.arange(1, DISTRICTS + 1), per), n),
            int4(np.tile(np.arange(UNDELIVERED_FROM, CUSTOMERS + 1), DISTRICTS), n),
        ]
    )


def order_lines(g: Generator, w: int, seed: int, now: datetime) -> bytes:
    d, o = _district_customer()
    counts = line_counts(seed, w)
    order = np.repeat(np.arange(len(o)), counts)
    n = len(order)
    number = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts) + 1
    undelivered = o[order] >= UNDELIVERED_FROM
    return rows(
        [
            int4(w, n),
            int4(d[order], n),
            int4(o[order], n),
            int4(number, n),
            int4(g.ints(1, ITEMS, n), n),
            int4(w, n),
            Field(ts(now, n).values, null=undelivered),
            int4(5, n),
            money(np.where(undelivered, g.ints(1, 999_999, n), 0), n),
            g.text(24, 24, n),
        ]
    )
