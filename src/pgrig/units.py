"""Sizes as people write them (256M, 16G) and as bytes."""

from __future__ import annotations

from pgrig.errors import UsageError

MB = 2**20
GB = 2**30


def parse_size(text: str) -> int:
    units = {"": 1, "k": 2**10, "m": MB, "g": GB, "t": 2**40, "p": 2**50}  # 1PiB: "not a size"
    value = text.strip().lower().removesuffix("b").removesuffix("i")
    unit = value[-1] if value and value[-1] in units else ""
    number = value[:-1] if unit else value
    try:
        return int(float(number) * units[unit])
    except (ValueError, OverflowError) as exc:  # inf overflows int()
        raise UsageError(f"cannot read size {text!r}", hint="use e.g. 256M, 1G, 16G") from exc


def size_text(n: float) -> str:
    """Bytes as a person reads them: 1.0 MiB, 4.0 GiB - never "0.0 GiB"."""
    for unit, factor in (("TiB", 2**40), ("GiB", GB), ("MiB", MB), ("KiB", 2**10)):
        if abs(n) >= factor:
            return f"{n / factor:,.1f} {unit}"
    return f"{n:.0f} bytes"


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, one decimal: ``25769803776`` -> ``"24.0 GiB"``.
    The environment's and the profiles' form (``B`` below 1 KiB, no thousands
    separator), kept apart from ``size_text`` so that stored reports stay as they were."""
    if abs(n) < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        # Promote when rounding would print "1024.0 KiB".
        if abs(round(value, 1)) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} EiB"
