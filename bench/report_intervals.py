#!/usr/bin/env python3
"""No interval over ±100% in the reports of the corpus's stored studies (issue 30).

Renders every report and comparison of a report corpus (default
/work/report-corpus, see its README.md; the renders are the ``report/`` and
``compare/`` entries of its corpus.json) with the pgrig this Python imports,
from copies of the stores (``bench/report_identity.py`` renders them the same
way), then reads every Markdown file it wrote and every interval in it:

- a median's interval, ``MEDIAN[ unit] (n=N, C% CI LOW–HIGH)``: too wide when
  (HIGH - LOW) / 2 exceeds the median;
- a difference's interval, ``C% CI LOW to HIGH%``: too wide when it spans more
  than 200 percentage points;
- a ratio's interval, ``C% CI LOW–HIGHx``: too wide when (HIGH - LOW) / 2
  exceeds its geometric centre;
- the older notation, ``±X%``: too wide above 100.

It prints each render's count of intervals and every one too wide (file, line,
text), and ``--baseline`` reads the corpus's stored baseline renders as well,
for the before/after. Exit 0 when no interval is too wide, 1 otherwise, 2 when
a render fails.

    .venv/bin/python bench/report_intervals.py [CORPUS] [--jobs N] [--baseline]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from report_identity import DEFAULT_CORPUS, Render, load_manifest, run_render  # noqa: E402

NUM = r"[-+]?[\d,]+(?:\.\d+)?"
MEDIAN = re.compile(rf"({NUM})(?: [^\s(|]+)? \(n=\d+, (\d+)% CI ({NUM})–({NUM})\)")
DIFF = re.compile(rf"(\d+)% CI ({NUM}) to ({NUM})%")
RATIO = re.compile(rf"(\d+)% CI ({NUM})–({NUM})x")
PLUS_MINUS = re.compile(rf"±({NUM})%")
LIMIT_PCT = 100.0


def _f(text: str) -> float:
    return float(text.replace(",", ""))


def too_wide(line: str) -> tuple[int, list[str]]:
    """(intervals found, the too-wide ones' text) in one line of a report."""
    found, wide = 0, []
    for m in MEDIAN.finditer(line):
        found += 1
        centre, low, high = _f(m.group(1)), _f(m.group(3)), _f(m.group(4))
        if centre == 0 or (high - low) / 2 > abs(centre) * LIMIT_PCT / 100:
            wide.append(m.group(0))
    for m in DIFF.finditer(line):
        found += 1
        if _f(m.group(3)) - _f(m.group(2)) > 2 * LIMIT_PCT:
            wide.append(m.group(0))
    for m in RATIO.finditer(line):
        found += 1
        low, high = _f(m.group(2)), _f(m.group(3))
        if low <= 0 or (high - low) / 2 > math.sqrt(low * high) * LIMIT_PCT / 100:
            wide.append(m.group(0))
    for m in PLUS_MINUS.finditer(line):
        found += 1
        if _f(m.group(1)) > LIMIT_PCT:
            wide.append(m.group(0))
    return found, wide


def scan(root: Path) -> tuple[int, list[str]]:
    count, bad = 0, []
    for md in sorted(root.rglob("*.md")):
        for no, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            n, wide = too_wide(line)
            count += n
            bad += [f"{md.relative_to(root)}:{no}: {w}" for w in wide]
    return count, bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--baseline", action="store_true", help="scan baseline/ too")
    args = parser.parse_args()
    renders = [
        r for r in load_manifest(args.corpus) if r.name.split("/")[0] in ("report", "compare")
    ]
    status = 0
    with tempfile.TemporaryDirectory(prefix="pgrig-intervals-") as tmp:
        work = Path(tmp)

        def render(r: Render) -> tuple[Render, str]:
            done = run_render(r, args.corpus, work, work / "out" / r.name)
            return r, "" if done.returncode == 0 else (done.stderr.strip() or "failed")

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            outcomes = list(pool.map(render, renders))
        total_bad = 0
        for r, error in outcomes:
            if error:
                print(f"{r.name}: render FAILED: {error.splitlines()[-1]}")
                status = 2
                continue
            count, bad = scan(work / "out" / r.name)
            total_bad += len(bad)
            line = f"{r.name}: {count} interval(s), {len(bad)} wider than ±{LIMIT_PCT:g}%"
            if args.baseline:
                old_count, old_bad = scan(args.corpus / "baseline" / r.name)
                line += f" (baseline: {old_count}, {len(old_bad)} too wide)"
            print(line)
            for b in bad:
                print(f"  {b}")
        print(f"{len(outcomes)} renders; {total_bad} interval(s) wider than ±{LIMIT_PCT:g}%")
    if status == 0 and total_bad:
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
