"""Checkpoints in a run's samples: when the checkpointer was busy, and whether
a count confirmed it (``find_checkpoints``)."""

from __future__ import annotations

from collections.abc import Iterable

from pgrig.monitor.model import Checkpoint, Sample


def find_checkpoints(
    samples: Iterable[Sample], counted_at_end: bool = False
) -> tuple[Checkpoint, ...]:
    """Intervals where the checkpointer was busy.

    Before PostgreSQL 17 the counters (``checkpoints_timed`` + ``_req``) go up
    when a checkpoint *starts*, and a spread checkpoint reports them while it
    writes, a second or two in: the interval is the checkpointer's busy time,
    and a second count inside it is the next checkpoint beginning without a
    rest (a 30-minute TPC-C run drew every checkpoint as a 2-s one followed by
    an unconfirmed one when counts closed intervals). From 17 on,
    ``num_done`` goes up when one *ends* (``counted_at_end``): a count closes
    the interval. Busy without any count: not confirmed (``completed=False``)."""
    out: list[Checkpoint] = []
    start: float | None = None
    counted = 0
    for s in samples:
        if s.pg is None:
            continue
        begin = s.t_s - s.interval_s
        if counted_at_end:
            if s.pg.checkpoint_active and start is None:
                start = begin
            if s.pg.checkpoints:
                first = begin if start is None else start
                out.append(Checkpoint(start_s=first, end_s=s.t_s, completed=True))
                start = None
            elif not s.pg.checkpoint_active and start is not None:
                out.append(Checkpoint(start_s=start, end_s=s.t_s, completed=False))
                start = None
            continue
        if s.pg.checkpoint_active:
            if start is None:
                start, counted = begin, 0
            elif s.pg.checkpoints and counted:  # the next one began without a rest
                out.append(Checkpoint(start_s=start, end_s=begin, completed=True))
                start, counted = begin, 0
            counted += s.pg.checkpoints
        elif start is not None:
            done = bool(counted or s.pg.checkpoints)
            out.append(Checkpoint(start_s=start, end_s=s.t_s, completed=done))
            start = None
        elif s.pg.checkpoints:  # begun and finished between two samples
            out.append(Checkpoint(start_s=begin, end_s=s.t_s, completed=True))
    if start is not None:
        out.append(Checkpoint(start_s=start, end_s=None, completed=False))
    return tuple(out)
