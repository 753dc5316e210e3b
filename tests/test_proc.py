"""pgrig.proc's thread pool: its tasks keep the submitter's context."""

from __future__ import annotations

from pgrig import ownership, proc


def test_a_context_pools_tasks_see_the_study_they_were_submitted_in() -> None:
    """Load directories made by a pool's threads were recorded with no study
    (issue 32); a plain pool's threads see the default."""
    with ownership.studying("a-study"), proc.ContextPool(max_workers=2) as pool:
        seen = [f.result() for f in [pool.submit(ownership.current_study) for _ in range(3)]]
    assert seen == ["a-study"] * 3
    from concurrent.futures import ThreadPoolExecutor

    with ownership.studying("a-study"), ThreadPoolExecutor(max_workers=1) as plain:
        assert plain.submit(ownership.current_study).result() == ""
