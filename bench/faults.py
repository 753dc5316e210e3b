#!/usr/bin/env python3
"""The fault suite (issue 40, Done when): each fault twice, through the tests
that already make it (no second copy of a scenario), with the time until
pgrig named it, its exit code, what it named, the store checked by the test's
own assertions, and a resume (``pgrig run ... --retry-failed``) that must run
exactly the failed steps once more (tests/faultlog.py).

    .venv/bin/python bench/faults.py [--times 2] [--only WORD] [--markdown FILE]

Run it alone: its faults load the machine (namespaces, loop devices, cgroups)
and their times are judged. Needs root (mounts, cgroups, network namespaces).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (fault, the test that makes it): each checks the exit code, the message and
# the store; tests/faultlog.py adds the timing and the resume.
FAULTS = (
    ("hung client", "tests/test_cli_faults.py::"
     "test_a_client_that_stops_progressing_fails_its_run_in_seconds"),
    ("read-only target", "tests/test_cli_faults.py::"
     "test_a_target_that_turns_read_only_mid_run_is_exit_6_and_clean_works_on_it"),
    ("OOM kill", "tests/test_storage_campaign.py::"
     "test_a_step_the_memory_cgroup_oom_kills_says_so"),
    ("server host's sshd killed", "tests/test_remote_faults.py::"
     "test_the_servers_host_ssh_lost_is_reconnected_not_taken_for_a_dead_server"),
    ("load host throttled", "tests/test_remote_faults.py::"
     "test_a_throttled_load_host_is_named_and_its_run_marked_disturbed"),
)  # fmt: skip


def run_once(node: str, log: Path) -> tuple[bool, float, str]:
    """One run of ``node`` noting into ``log``: passed, seconds, pytest's last words."""
    env = dict(os.environ, PGRIG_FAULT_LOG=str(log))
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", node],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, env=env,
    )  # fmt: skip
    tail = [line for line in done.stdout.splitlines() if line.strip()][-1:] or [""]
    failure = [line for line in done.stdout.splitlines() if line.startswith("E ")][:3]
    return done.returncode == 0, time.monotonic() - t0, "; ".join(failure) or tail[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--times", type=int, default=2, help="runs of each fault (2)")
    ap.add_argument("--only", help="the faults whose name holds this word")
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("cannot run: the faults need root (mounts, cgroups, namespaces)", file=sys.stderr)
        return 3
    rows = [
        "| fault | run | named in | exit | named | resume (--retry-failed) | test |",
        "|---|---|---|---|---|---|---|",
    ]
    failed = 0
    for fault, node in FAULTS:
        if args.only and args.only not in fault:
            continue
        for n in range(1, args.times + 1):
            with tempfile.TemporaryDirectory() as tmp:
                log = Path(tmp) / "faults.jsonl"
                passed, took, said = run_once(node, log)
                notes = [json.loads(line) for line in log.read_text().splitlines()] if (
                    log.exists()) else []  # fmt: skip
            if not passed or not notes:
                failed += 1
                rows.append(f"| {fault} | {n} | - | - | - | - | FAILED in {took:.0f} s: {said} |")
                print(rows[-1], flush=True)
                continue
            note = notes[-1]
            named_in = note["named_in_s"]
            since = note.get("since", "the fault")
            when = f"{named_in:.1f} s after {since}" if named_in is not None else f"at {since}"
            extra = f"; tps {note['tps']}" if note.get("tps") else ""
            rows.append(
                f"| {note['fault']} | {n} | {when} | {note['exit']} | {note['named']}{extra} | "
                f"{note['resume'] or '-'} | passed in {took:.0f} s |"
            )
            print(rows[-1], flush=True)
    table = "\n".join(rows)
    print("\n" + table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
