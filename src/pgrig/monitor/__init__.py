"""Watch every measured run and say what the bottleneck was, with the evidence.

    from pgrig import monitor
    with monitor.Watch(ctx, interval=1.0, limits=monitor.limits_from(probe_results)) as watch:
        result, raw = step.action(ctx, line)
    mon = watch.result(result)  # MonitorResult: samples, checkpoints, verdict

See docs/monitor.md for what is sampled and the verdict rules.
"""

from pgrig.monitor.limits import limits_from
from pgrig.monitor.model import Limits, MonitorResult, Verdict
from pgrig.monitor.watch import Watch

__all__ = ["Limits", "MonitorResult", "Verdict", "Watch", "limits_from"]
