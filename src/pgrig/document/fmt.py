"""Number formatting and repeat statistics for the report: pure functions."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pgrig import stats

# A repeated point whose relative range exceeds this is flagged as noisy.
NOISE_THRESHOLD_PCT = 5.0

_SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float) -> str:
    """Three significant digits with a k/M/G suffix, the way fio prints IOPS=131k."""
    for factor, suffix in _SI:
        if abs(value) >= factor:
            scaled = value / factor
            if abs(scaled) >= 100:
                return f"{scaled:.0f}{suffix}"
            if abs(scaled) >= 10:
                return f"{scaled:.1f}{suffix}"
            return f"{scaled:.2f}{suffix}"
    return f"{value:.0f}"


def slug(text: str, sep: str = "-") -> str:
    """A name for a file or an anchor: letters and digits, lower case, ``sep`` between."""
    return re.sub(r"[^a-z0-9]+", sep, text.lower()).strip(sep)


def clients(n: int) -> str:
    """'1 client', '8 clients'."""
    return f"{n} client{'s' if n != 1 else ''}"


def integer(value: float) -> str:
    return f"{value:,.0f}"


def rate(value: float) -> str:
    """Rates (ops/s, tps, rows/s): whole numbers unless they are small."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ms(value: float) -> str:
    """Milliseconds with pgbench's three decimals."""
    return f"{value:,.3f}"


def us(value: float) -> str:
    """Microseconds, with the digits a rate shows (whole numbers unless small)."""
    return rate(value)


def seconds(value: float) -> str:
    return f"{value:,.2f} s"


def size(n_bytes: int) -> str:
    """Binary units, as lsblk and free print them."""
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


Formatter = Callable[[float], str]


def percentile_method(made: Sequence[tuple[int, int | None]], per: str = "run") -> str:
    """How latency percentiles were made, said once under a table, from each
    ``per``'s (samples, digits): of how many samples (their range), and whether
    from an HdrHistogram at ``digits`` significant digits or - runs recorded
    before pgrig kept histograms, ``digits`` None - from every sample sorted."""

    def count(of: Sequence[int]) -> str:
        low, high = min(of, default=0), max(of, default=0)
        return f"{low:,}" if low == high else f"{low:,}-{high:,}"

    kept = sorted({d for _, d in made if d is not None})
    parts = []
    if kept:
        within = " / ".join(f"{100 * 10.0**-d:g}%" for d in kept)
        places = " / ".join(str(d) for d in kept)
        samples = count([n for n, d in made if d is not None])
        parts.append(
            f"an HdrHistogram of {samples} samples per {per} at {places} significant digits "
            f"(within about {within}); max exact"
        )
    if exact := [n for n, d in made if d is None]:
        older = "older runs: " if kept else ""
        parts.append(f"{older}every sample sorted ({count(exact)} per {per})")
    return "Nearest-rank percentiles from " + "; ".join(parts) + "."


def optional(value: float | None, fmt: Formatter) -> str:
    if value is None:
        return "n/a"
    return fmt(value)


@dataclass(frozen=True)
class Spread:
    """Median and range of repeated measurements of one point."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return stats.headline(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def range_pct(self) -> float:
        """(max - min) / median, in percent: 0 for a single value."""
        if self.n < 2 or self.median == 0:
            return 0.0
        return (self.high - self.low) / abs(self.median) * 100

    @property
    def noisy(self) -> bool:
        return self.range_pct > NOISE_THRESHOLD_PCT

    @property
    def interval(self) -> stats.Interval | None:
        """The distribution-free interval of the median (``stats.median_interval``)."""
        return stats.median_interval(self.values)

    def describe(self, fmt: Formatter | None = None) -> str:
        """The one spread notation of every table: 'n=3, 75% CI 2,428–3,582';
        'n=2, range 2,224–2,634' (two runs make no interval worth the name);
        'n=3, too noisy for an interval'; '' for a single run."""
        fmt = fmt or rate
        if self.n < 2:
            return ""
        iv = self.interval
        if self.n == 2 or iv is None:
            return f"n={self.n}, range {fmt(self.low)}–{fmt(self.high)}"
        if iv.too_noisy(self.median):
            return f"n={self.n}, too noisy for an interval"
        return f"n={self.n}, {100 * iv.confidence:.0f}% CI {fmt(iv.low)}–{fmt(iv.high)}"


SPREAD_NOTE = (
    "(n=N, C% CI a–b): the median of N repeats and the distribution-free (order-statistic) "
    "interval that holds the true median with probability C: [min, max] of the runs below 6 "
    "runs (75% at 3, 88% at 4, 94% at 5), the narrowest at ≥ 95% from 6 on; 'too noisy for an "
    f"interval' when it spans more than ±{stats.TOO_NOISY_PCT:.0f}% of the median; ⚠ where the "
    f"runs range over more than {NOISE_THRESHOLD_PCT:g}%."
)


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("spread of no values")
    return Spread(tuple(values))


def with_spread(s: Spread, fmt: Formatter = rate, unit: str = "") -> str:
    """``median[ unit] (n=N, C% CI a–b)`` (``Spread.describe``), ⚠ when the runs
    range widely; just the value when it was measured once."""
    text = fmt(s.median) + (f" {unit}" if unit else "")
    if s.n < 2:
        return text
    text = f"{text} ({s.describe(fmt)})"
    return text + (" ⚠" if s.noisy else "")
