"""A target's server from start to end, for every command: checked before
anything is created, its storage built, its server made or connected to,
described, and finally removed - or kept, stopped, when asked or when the
server did not come back after a crash (the evidence).

What each of these means is the target's kind's business
(``pgrig.registry.target.TargetKind``, listed in ``pgrig.registry.target_kinds()``);
this module asks the kind and never names one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any

from pgrig import ownership, registry
from pgrig.errors import UsageError
from pgrig.registry import AnyKind
from pgrig.registry.target import THIS_MACHINE, Demands, Target, TargetSpec
from pgrig.storage import kernel
from pgrig.ui import Ui


def check_target(
    spec: TargetSpec,
    kind: AnyKind,
    demands: Demands,
    *,
    notes: list[str] | None = None,
    planning: bool = False,
) -> Target:
    """Everything about one target that can be refused, refused before anything
    is created (its kind says what). What the profile had to change for this
    major is added to ``notes``."""
    notes = notes if notes is not None else []
    if spec.kernel:  # a kernel-settings axis: root, names, values
        kernel.check(spec.kernel, trial=not planning)
    target = Target(spec, kind, kind.check(spec, demands, notes))
    elsewhere = sorted(target.machines - {THIS_MACHINE}) if spec.kernel else []
    if elsewhere:
        # storage/kernel.py writes this machine's /proc/sys: not the server's host
        raise UsageError(
            f"{demands.source}: target {spec.name}: kernel settings "
            f"({', '.join(name for name, _ in spec.kernel)}) are set on this machine, and "
            f"the target runs on {', '.join(elsewhere)}",
            hint="set them on that host (sysctl -w), or drop them from the target",
        )
    return target


def check_together(targets: Sequence[Target], notes: list[str]) -> None:
    """What each kind refuses over all its targets at once (after every check),
    kind by kind in the order the targets first name them."""
    for kind in dict.fromkeys(t.kind for t in targets):
        kind.check_together([t for t in targets if t.kind is kind], notes)


def check_concurrent(targets: Sequence[Target], source: str) -> None:
    """``concurrent = true``: targets run at once only on machines of their own,
    else each would measure the other's load."""
    seen: dict[str, str] = {}
    for t in targets:
        for machine in sorted(t.machines):
            other = seen.setdefault(machine, t.name)
            if other != t.name:
                raise UsageError(
                    f"{source}: [campaign] concurrent = true, but targets {other} and "
                    f"{t.name} both run on {machine}: at once, each would measure the "
                    "other's load",
                    hint="drop concurrent to run them in turn, or give each target a host "
                    'of its own (host = "db1" in an inventory; docs/hosts.md)',
                )


def clean_orphans(study: str | None, others: list[str]) -> list[str]:
    """What killed pgrig runs of ``study`` (None: of any) left, kind by kind in
    their ``clean_rank`` order; other studies' orphans described in ``others``.
    What each kind ``leaves`` is found in one pass for all, and handed to it: a
    kind with nothing there (and nothing ``left_beyond``) is not asked."""
    kinds = sorted(registry.target_kinds().values(), key=attrgetter("clean_rank"))
    found = ownership.find(kind.leaves for kind in kinds)
    lines: list[str] = []
    for kind in kinds:
        if (mine := found.of(kind.leaves)) or kind.left_beyond():
            lines += kind.clean(study, others, mine)
    return lines


@contextlib.contextmanager
def storage(t: Target, ui: Ui, *, keep: bool) -> Iterator[Any]:
    """The target's storage, built for the ``with`` block; kept with the cluster
    under --keep or when a crashed server is kept as evidence."""
    with t.kind.storage(t, ui, keep=lambda: keep or t.lost is not None) as built:
        yield built


def server(t: Target, name: str, study: str, ui: Ui, *, keep: bool) -> Any:
    """The target's server, up for the ``with`` block: an existing one connected
    to, or a throwaway cluster named ``name`` made by its kind."""
    return t.kind.server(t, name, study, ui, keep=lambda: keep or t.lost is not None)
