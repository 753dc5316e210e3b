"""What the console says of a finished step: pure formatting."""

from __future__ import annotations

import pytest

from pgrig.ui import Ui, count, duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.421, "0.42 s"), (0.004, "0.00 s"), (3.14, "3.1 s"), (31.4, "31 s"), (380.2, "6 min 20 s")],
)
def test_a_step_under_a_second_is_not_zero_seconds(seconds: float, text: str) -> None:
    """'count(*) by seq scan (0 s): 421 ms' said the step took no time."""
    assert duration(seconds) == text


def test_a_count_of_one_is_singular() -> None:
    assert count(1, "step") == "1 step"
    assert (count(0, "step"), count(1_234, "step")) == ("0 steps", "1,234 steps")


# COLUMNS=0 emptied stderr: progress, failures and warnings all went (issue 33).
@pytest.mark.parametrize("columns", ["0", "1", "-5"])
def test_a_console_narrower_than_a_word_still_says_everything(
    columns: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    ui = Ui()
    ui.warn("the store is locked")
    ui.fail("local: run 1 failed")
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: the store is locked" in err and "✗ local: run 1 failed" in err
