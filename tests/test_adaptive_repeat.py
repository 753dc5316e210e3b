"""Adaptive repeats (issue 30.4): ``repeat = { until_diff_pct = X }`` repeats a point
until the bootstrap 95% interval of each difference to the baseline is within
±X%, bounded by ``max`` and the plan's time for that many repeats. Pure: the
policy decides from the figures recorded so far (bench/adaptive_repeat.py runs it
on real pgbench)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrig import campaign
from pgrig.errors import PgrigError
from pgrig.policy import RunPolicy

QUIET = [1000.0, 1004.0, 998.0]  # ±0.3%: the difference is known to within 1%
NOISY = [1000.0, 700.0, 1300.0]  # ±30%


def test_stops_as_soon_as_the_difference_is_known() -> None:
    pol = RunPolicy(repeat=3, until_diff_pct=2.0, max_repeat=10)
    assert pol.adaptive
    assert pol.more(2, [QUIET[:2], QUIET[:2]])  # below min: always
    assert not pol.more(3, [QUIET, [v * 1.1 for v in QUIET]])  # known: stop at min
    assert pol.more(3, [QUIET, NOISY])  # not known: another
    assert not pol.more(10, [QUIET, NOISY])  # max_repeat bounds it


def test_one_target_measures_the_difference_another_set_could_show() -> None:
    pol = RunPolicy(repeat=3, until_diff_pct=2.0, max_repeat=10)
    assert not pol.more(3, [QUIET])
    assert pol.more(3, [NOISY])


def test_the_baseline_is_the_one_named() -> None:
    pol = RunPolicy(repeat=3, until_diff_pct=2.0, max_repeat=10)
    # the noisy target is the baseline: every difference carries its noise
    assert pol.more(3, [QUIET, NOISY, QUIET], baseline=1)
    assert pol.diff_ok([QUIET, QUIET], baseline=0)


def test_the_plans_time_bounds_the_repeats() -> None:
    """Runs slower than planned: the repeats stop where the plan's time for
    max_repeat of them ends, not at max_repeat."""
    pol = RunPolicy(repeat=3, until_diff_pct=2.0, max_repeat=10)
    # 3 repetitions planned at 10 s each took 95 s: a 4th would end past 100 s
    assert not pol.more(3, [QUIET, NOISY], elapsed_s=95.0, rep_estimate_s=10.0)
    assert pol.more(3, [QUIET, NOISY], elapsed_s=30.0, rep_estimate_s=10.0)


def test_the_policy_says_what_it_repeats_until() -> None:
    pol = RunPolicy(repeat=3, until_diff_pct=5.0, max_repeat=10)
    assert pol.describe_repeats() == (
        "3 to 10 (until the 95% interval of each difference to the baseline is within ±5%)"
    )
    assert pol.run_label(4) == ", run 4"


def test_until_decided_repeats_until_each_comparison_is_decided() -> None:
    """Issue 39: Pinpoint's "add repeats until different or the same". Synthetic
    figures: a 30% drop with tight runs is decided at min; a 2% wobble with ±30%
    runs is not; max_repeat bounds it, and the plan's time does not."""
    pol = RunPolicy(repeat=3, until_decided=True, max_repeat=8)
    assert pol.adaptive and pol.describe_repeats() == (
        "3 to 8 (until each comparison with the baseline is decided)"
    )
    assert not pol.more(3, [QUIET, [v * 0.7 for v in QUIET]])  # worse: decided
    assert not pol.more(3, [QUIET, [v * 1.001 for v in QUIET]])  # the same within 5%: decided
    assert pol.more(3, [NOISY, [v * 1.02 for v in NOISY]])  # not yet
    assert pol.more(3, [NOISY, [v * 1.02 for v in NOISY]], elapsed_s=95.0, rep_estimate_s=10.0)
    assert not pol.more(8, [NOISY, [v * 1.02 for v in NOISY]])
    assert pol.more(3, [[], QUIET])  # a side with no figure yet is not decided
    assert not pol.more(3, [QUIET])  # one target: nothing to decide


def _campaign(tmp_path: Path, repeat: str) -> campaign.Campaign:
    text = f"""[campaign]
name = "adaptive"
repeat = {repeat}

[[target]]
name = "a"
directory = "{tmp_path}"

[[workload]]
type = "tpcb"
scales = [1]
clients = [1]
duration = 1
"""
    path = tmp_path / "c.toml"
    path.write_text(text)
    return campaign.load(path)


def test_campaign_key(tmp_path: Path) -> None:
    camp = _campaign(tmp_path, "{ until_diff_pct = 5, min = 3, max = 8 }")
    pol = camp.policy
    assert (pol.repeat, pol.until_diff_pct, pol.max_repeat, pol.until_ci_pct) == (3, 5.0, 8, None)
    decided = _campaign(tmp_path, '{ until = "decided", min = 3, max = 12 }').policy
    assert (decided.repeat, decided.max_repeat, decided.until_decided) == (3, 12, True)


@pytest.mark.parametrize(
    ("repeat", "says"),
    [
        ("{ until_diff_pct = 5, min = 2 }", "a difference to the baseline needs min >= 3"),
        ("{ until_diff_pct = 0 }", "a precision in %"),
        ("{ min = 3 }", "give the wanted precision in %"),
        ('{ until = "done" }', 'the one goal is "decided"'),
        ('{ until = "decided", min = 2 }', "a verdict needs 3 runs a side"),
    ],
)
def test_bad_keys_say_what_to_write(tmp_path: Path, repeat: str, says: str) -> None:
    with pytest.raises(PgrigError, match=says):
        _campaign(tmp_path, repeat)


def test_the_plan_says_how_long_the_repeats_may_take(disk_dir: Path) -> None:
    """The plan's time for max repeats bounds the adaptive ones: `pgrig plan` says it."""
    import subprocess
    import sys

    path = disk_dir / "c.toml"
    _campaign(disk_dir, "{ until_diff_pct = 5, min = 3, max = 8 }")  # writes c.toml
    done = subprocess.run(
        [sys.executable, "-m", "pgrig", "plan", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "repeats 3 to 8 (until the 95% interval of each difference" in done.stdout
    assert "if repeats extend to 8, until the wanted precision is met)" in done.stdout
