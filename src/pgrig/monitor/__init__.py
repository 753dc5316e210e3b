"""Watch every measured run and say what the bottleneck was, with the evidence,
and whether other work on the machine disturbed it.

    from pgrig import monitor, registry
    baseline = monitor.idle_baseline(3.0, target=ctx.target)  # once, before the study
    with monitor.Watch(ctx, limits=monitor.limits_from(probe_results), baseline=baseline) as watch:
        result, raw = registry.resolve(step.action)(ctx, line)
    mon = watch.result(result)  # MonitorResult: samples, checkpoints, verdict, others, noise
    monitor.is_disturbed(mon)   # other processes took the machine: do not count this run

See docs/monitor.md for what is sampled, the verdict rules and interference.
"""

from typing import TYPE_CHECKING

from pgrig import lazily

if TYPE_CHECKING:
    from pgrig.monitor.heartbeat import Pulse, ServerHung
    from pgrig.monitor.interference import (
        Thresholds,
        baseline_busy,
        disturbed_run_keys,
        idle_baseline,
        is_disturbed,
        wait_quiet,
    )
    from pgrig.monitor.limits import limits_from
    from pgrig.monitor.model import (
        Disturbance,
        IdleBaseline,
        Limits,
        MonitorResult,
        Noise,
        OtherLoad,
        Verdict,
    )
    from pgrig.monitor.watch import Watch

__getattr__ = lazily(
    __name__,
    {
        "Pulse": "pgrig.monitor.heartbeat",
        "ServerHung": "pgrig.monitor.heartbeat",
        "Thresholds": "pgrig.monitor.interference",
        "baseline_busy": "pgrig.monitor.interference",
        "disturbed_run_keys": "pgrig.monitor.interference",
        "idle_baseline": "pgrig.monitor.interference",
        "is_disturbed": "pgrig.monitor.interference",
        "wait_quiet": "pgrig.monitor.interference",
        "limits_from": "pgrig.monitor.limits",
        "Disturbance": "pgrig.monitor.model",
        "IdleBaseline": "pgrig.monitor.model",
        "Limits": "pgrig.monitor.model",
        "MonitorResult": "pgrig.monitor.model",
        "Noise": "pgrig.monitor.model",
        "OtherLoad": "pgrig.monitor.model",
        "Verdict": "pgrig.monitor.model",
        "Watch": "pgrig.monitor.watch",
    },
)

__all__ = [
    "Disturbance",
    "IdleBaseline",
    "Limits",
    "MonitorResult",
    "Noise",
    "OtherLoad",
    "Pulse",
    "Thresholds",
    "Verdict",
    "ServerHung",
    "Watch",
    "baseline_busy",
    "disturbed_run_keys",
    "idle_baseline",
    "is_disturbed",
    "limits_from",
    "wait_quiet",
]
