"""Binary COPY rows built by numpy in blocks: the TPC-B and TPC-C loaders' one
row builder.

A block is one structured numpy array: per row the field count, then per field
its length and a fixed-width slot. A variable-length field (varchar) gets a
slot as wide as its longest value; a mask over the block's bytes keeps, per
row, only the bytes that field's length covers, so one boolean compress packs
the rows for the wire. A NULL field has length -1 and no bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension
COPY_TRAILER = b"\xff\xff"
PG_EPOCH = datetime(2000, 1, 1)  # timestamps are microseconds since this instant
ALNUM = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8
)
DIGITS = np.frombuffer(b"0123456789", dtype=np.uint8)
POOL_BYTES = 8192  # random characters a string is cut from, at a random offset
# numeric's binary form: ndigits, weight, sign, dscale, then base-10,000 digits.
NUMERIC_MONEY = np.dtype([("head", ">i2", (4,)), ("digits", ">i2", (3,))])
NUMERIC_FRACTION = np.dtype([("head", ">i2", (4,)), ("digit", ">i2")])
NUMERIC_NEGATIVE = 0x4000


@dataclass(frozen=True)
class Field:
    """One column of a block: ``values`` (one per row; for text, a 2-D uint8
    array as wide as the longest value), ``lengths`` for a variable-length text
    field, ``null`` where the value is NULL."""

    values: npt.NDArray[np.generic]
    lengths: npt.NDArray[np.int64] | None = None
    null: npt.NDArray[np.bool_] | None = None


def rows(fields: Sequence[Field]) -> bytes:
    """The binary COPY rows (no header, no trailer) of equally long ``fields``."""
    n = len(fields[0].values)
    layout: list[tuple[str, np.dtype[np.generic] | str, tuple[int, ...]]] = [("n", ">i2", ())]
    for i, f in enumerate(fields):
        layout.append((f"l{i}", ">i4", ()))
        layout.append((f"v{i}", f.values.dtype, f.values.shape[1:]))
    block = np.empty(n, dtype=np.dtype(layout))
    block["n"] = len(fields)
    mask: npt.NDArray[np.bool_] | None = None
    for i, f in enumerate(fields):
        block[f"v{i}"] = f.values
        slot = f.values.dtype.itemsize * int(np.prod(f.values.shape[1:], dtype=np.int64))
        length = (
            np.full(n, slot, dtype=np.int64) if f.lengths is None else f.lengths.astype(np.int64)
        )
        if f.null is not None:
            length = np.where(f.null, -1, length)
        block[f"l{i}"] = length
        if f.lengths is None and f.null is None:
            continue
        if mask is None:
            mask = np.ones((n, block.dtype.itemsize), dtype=np.bool_)
        start = block.dtype.fields[f"v{i}"][1]  # type: ignore[index]
        mask[:, start : start + slot] = np.arange(slot) < length[:, None]
    raw = block.view(np.uint8).reshape(n, block.dtype.itemsize)
    return raw.tobytes() if mask is None else raw[mask].tobytes()


class Generator:
    """Random values for the rows, from one numpy generator."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.alnum = ALNUM[self.rng.integers(0, len(ALNUM), POOL_BYTES)]
        self.digits = DIGITS[self.rng.integers(0, len(DIGITS), POOL_BYTES)]

    def ints(self, lo: int, hi: int, n: int) -> npt.NDArray[np.int64]:
        """n uniform integers in [lo, hi]."""
        return self.rng.integers(lo, hi + 1, n)

    def text(self, lo: int, hi: int, n: int, pool: str = "alnum") -> Field:
        """n random strings of lo..hi characters (clause 4.3.2.2's a-/n-strings)."""
        chars = self.alnum if pool == "alnum" else self.digits
        windows = np.lib.stride_tricks.sliding_window_view(chars, hi)
        values = windows[self.rng.integers(0, len(chars) - hi + 1, n)]
        lengths = None if lo == hi else self.ints(lo, hi, n)
        return Field(values, lengths)

    def original(self, f: Field, share: float = 0.1) -> Field:
        """``share`` of the strings carry "ORIGINAL" at a random position (4.3.3.1)."""
        assert f.lengths is not None
        rows_ = np.flatnonzero(self.rng.random(len(f.values)) < share)
        at = (self.rng.random(len(rows_)) * (f.lengths[rows_] - 7)).astype(np.int64)
        values = f.values.copy()
        values[rows_[:, None], at[:, None] + np.arange(8)] = np.frombuffer(b"ORIGINAL", np.uint8)
        return Field(values, f.lengths)


def fixed_text(value: bytes, n: int) -> Field:
    return Field(np.broadcast_to(np.frombuffer(value, np.uint8), (n, len(value))))


def int4(values: npt.ArrayLike, n: int) -> Field:
    return Field(np.broadcast_to(np.asarray(values, dtype=">i4"), (n,)))


def timestamp(at: datetime, n: int) -> Field:
    micros = (at - PG_EPOCH) // np.timedelta64(1, "us").item()
    return Field(np.full(n, micros, dtype=">i8"))


def money(cents: npt.ArrayLike, n: int) -> Field:
    """numeric(p, 2) values given in hundredths, up to 99,999,999.99 in size.
    Always three digits of weight 1 - the server strips the zeros."""
    c = np.broadcast_to(np.asarray(cents, dtype=np.int64), (n,))
    a = np.abs(c)
    out = np.empty(n, dtype=NUMERIC_MONEY)
    out["head"][:, 0] = 3
    out["head"][:, 1] = 1
    out["head"][:, 2] = np.where(c < 0, NUMERIC_NEGATIVE, 0)
    out["head"][:, 3] = 2
    out["digits"][:, 0] = a // 100 // 10_000
    out["digits"][:, 1] = a // 100 % 10_000
    out["digits"][:, 2] = a % 100 * 100
    return Field(out)


def fraction(ten_thousandths: npt.ArrayLike, n: int) -> Field:
    """numeric(4, 4) values in [0, 1) given in ten-thousandths."""
    out = np.empty(n, dtype=NUMERIC_FRACTION)
    out["head"] = (1, -1, 0, 4)
    out["digit"] = np.broadcast_to(np.asarray(ten_thousandths, dtype=np.int64), (n,))
    return Field(out)
