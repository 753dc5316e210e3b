"""Issue 39's property of the one decision procedure, on 100,000 seeded pairs
(the suite checks 1,000: tests/test_stats.py).

Normal and log-normal sides, 2-20 runs a side, equal and unequal spreads, a
third of them without a change. Prints, per kind of pair: how often the
interval and the verdict disagreed (must be 0), how often "the same" lay
outside the margin (0), the false-call rate on pairs without a change (the
stated level is 5%), and how the pairs with a change were decided.

    .venv/bin/python bench/verdicts.py [PAIRS]
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections import Counter

from pgrig import stats


def pair(rng: random.Random, i: int) -> tuple[list[float], list[float], float, str]:
    n, m = rng.randint(2, 20), rng.randint(2, 20)
    shift = 0.0 if i % 3 == 0 else rng.choice((-0.3, -0.1, -0.03, 0.02, 0.08, 0.5))
    sd = rng.choice((0.01, 0.05, 0.15))
    spread = (sd, sd) if i % 2 else (sd, sd * rng.choice((0.3, 3.0)))
    lognormal = i % 4 < 2

    def side(k: int, level: float, s: float) -> list[float]:
        if lognormal:
            return [level * math.exp(rng.gauss(0.0, s)) for _ in range(k)]
        return [max(level * rng.gauss(1.0, s), 1e-6) for _ in range(k)]

    kind = f"{'log-normal' if lognormal else 'normal'}, {'equal' if i % 2 else 'unequal'}"
    return side(n, 1000.0, spread[0]), side(m, 1000.0 * (1 + shift), spread[1]), shift, kind


def main(count: int) -> int:
    rng = random.Random(39)
    disagree = outside = 0
    nulls: Counter[str] = Counter()
    false_calls: Counter[str] = Counter()
    decided: Counter[tuple[float, str]] = Counter()
    started = time.perf_counter()
    for i in range(count):
        base, other, shift, kind = pair(rng, i)
        c = stats.decide(base, other)
        bounds = c.log_interval()
        excludes = bounds is not None and (bounds[0] > 0 or bounds[1] < 0)
        disagree += c.called != excludes
        if c.verdict == stats.SAME:
            edge = math.log1p(c.margin_pct / 100)
            outside += bounds is None or not (-edge <= bounds[0] and bounds[1] <= edge)
        if shift == 0.0:
            nulls[kind] += 1
            false_calls[kind] += c.called
        decided[(shift, c.verdict)] += 1
    took = time.perf_counter() - started
    print(f"{count:,} pairs in {took:.1f} s ({took / count * 1e6:.0f} us a decision)")
    print(f"interval and verdict disagree: {disagree}; 'the same' outside the margin: {outside}")
    print("false calls on pairs without a change (stated level 5%):")
    for kind in sorted(nulls):
        rate = false_calls[kind] / nulls[kind]
        se = math.sqrt(0.05 * 0.95 / nulls[kind])
        print(f"  {kind:22s} {false_calls[kind]:5d} of {nulls[kind]:6d} = {rate:.2%} (±{se:.2%})")
    total = sum(false_calls.values()) / sum(nulls.values())
    print(f"  {'all':22s} {total:.2%}")
    print("verdicts by true change:")
    for shift in sorted({s for s, _ in decided}):
        row = {v: decided[(shift, v)] for v in (stats.BETTER, stats.WORSE, stats.SAME,
                                                  stats.NOT_YET)}  # fmt: skip
        n = sum(row.values())
        print(f"  {shift:+6.0%}: " + ", ".join(f"{v} {k / n:.1%}" for v, k in row.items()))
    return (
        1
        if disagree or outside or total > 0.05 + 3 * math.sqrt(0.05 * 0.95 / sum(nulls.values()))
        else 0
    )


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
