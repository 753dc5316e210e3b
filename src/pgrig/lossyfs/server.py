"""The filesystem process: ``python -m pgrig.lossyfs serve ...``.

It mounts, then serves FUSE requests and a control socket on one trio loop, so a
power loss is applied between two filesystem operations, never inside one.

Control protocol: one JSON object per connection, one JSON reply (``{"ok": ...}``).
Commands: ``ping``, ``stats``, ``power_loss`` (mode, seed, keep_fraction,
torn_bytes, only, prefer) and ``shutdown`` (clean: everything cached becomes durable).
After ``power_loss`` the process answers EIO to every filesystem call, unmounts
(lazily, as clients may still hold files open) and exits without syncing.

Exit codes: 0 after a clean shutdown or a power loss, 1 on a startup error.
SIGTERM/SIGINT mean a clean shutdown; SIGKILL is a power loss in "drop" mode.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pyfuse3
import trio

from pgrig.lossyfs.fs import LossyOperations
from pgrig.lossyfs.powerloss import MODES, PowerLossReport, cut_power
from pgrig.lossyfs.volume import METADATA_MODELS, Volume

log = logging.getLogger("pgrig.lossyfs")
MAX_REQUEST = 65536


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pgrig.lossyfs")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="mount and serve (runs in the foreground)")
    serve.add_argument("--backing", type=Path, required=True)
    serve.add_argument("--mountpoint", type=Path, required=True)
    serve.add_argument("--control", type=Path, required=True, help="unix socket to listen on")
    serve.add_argument("--fsname", default="pgrig-lossyfs")
    serve.add_argument("--page-size", type=int, default=4096)
    serve.add_argument("--metadata", choices=METADATA_MODELS, default="strict")
    serve.add_argument("--allow-other", action="store_true")
    serve.add_argument("--sync-delay-us", type=float, default=0.0)
    serve.add_argument("--debug", action="store_true")
    return parser.parse_args(argv)


class Server:
    def __init__(self, ops: LossyOperations, control: Path) -> None:
        self.ops = ops
        self.control = control

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            listener = await self._listen()
            nursery.start_soon(self._accept, listener)
            nursery.start_soon(self._signals)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()

    async def _listen(self) -> trio.SocketListener:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        self.control.unlink(missing_ok=True)
        await sock.bind(str(self.control))
        os.chmod(self.control, 0o600)
        sock.listen(8)
        return trio.SocketListener(sock)

    async def _accept(self, listener: trio.SocketListener) -> None:
        while True:
            stream = await listener.accept()
            reply: dict[str, object] = {}
            async with stream:
                try:
                    with trio.fail_after(30):
                        request = await self._read(stream)
                        reply = self.dispatch(request)
                        await stream.send_all(json.dumps(reply).encode() + b"\n")
                except (trio.TooSlowError, trio.BrokenResourceError, ValueError) as exc:
                    log.warning("control request failed: %s", exc)
            if self.ops.dead or reply.get("bye"):
                pyfuse3.terminate()

    async def _read(self, stream: trio.SocketStream) -> dict[str, Any]:
        data = b""
        while not data.endswith(b"\n"):
            chunk = await stream.receive_some(4096)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_REQUEST:
                raise ValueError("control request too long")
        request = json.loads(data or b"{}")
        if not isinstance(request, dict):
            raise ValueError("control request is not a JSON object")
        return request

    def dispatch(self, request: dict[str, Any]) -> dict[str, object]:
        command = request.get("cmd")
        try:
            if command == "ping":
                return {"ok": True, "pid": os.getpid(), "dead": self.ops.dead}
            if command == "stats":
                return {"ok": True, "stats": self.ops.stats()}
            if command == "sync_delay":  # the latency layer's calibration
                self.ops.syncs.sync_delay_s = max(0.0, float(request["us"])) / 1e6
                self.ops.syncs.sync_factor = max(1.0, float(request.get("factor", 1.0)))
                self.ops.syncs.sync_overhead_s = (
                    max(0.0, float(request.get("overhead_us", 0))) / 1e6
                )
                return {"ok": True}
            if command == "read_delay":  # the latency layer's calibration, for reads
                self.ops.read_delay_s = max(0.0, float(request["us"])) / 1e6
                return {"ok": True}
            if command == "fail_syncs":  # fsyncgate: the next N file syncs get EIO
                self.ops.syncs.fail_syncs = max(0, int(request["count"]))
                return {"ok": True}
            if command == "shutdown":
                return {"ok": True, "bye": True}
            if command == "power_loss":
                return {"ok": True, "report": self._power_loss(request).to_json()}
        except (ValueError, OSError, KeyError) as exc:
            log.error("%s failed: %s", command, exc)
            return {"ok": False, "error": f"{command}: {exc}"}
        return {"ok": False, "error": f"unknown command {command!r}"}

    def _power_loss(self, request: dict[str, Any]) -> PowerLossReport:
        mode = request.get("mode", "drop")
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        if self.ops.dead:
            raise ValueError("the power is already off")
        self.ops.dead = True  # from here on every filesystem call fails with EIO
        report = cut_power(
            self.ops.volume,
            mode,
            seed=int(request.get("seed", 0)),
            keep_fraction=float(request.get("keep_fraction", 0.5)),
            torn_bytes=request.get("torn_bytes"),
            only=request.get("only"),
            prefer=request.get("prefer"),
        )
        log.info("power loss: %s", report)
        return report

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %d: clean shutdown", signum)
                pyfuse3.terminate()
                return


def serve(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s lossyfs[%(process)d] %(levelname)s %(message)s",
    )
    volume = Volume(args.backing, page_size=args.page_size, metadata=args.metadata)
    volume.load()
    ops = LossyOperations(volume, sync_delay_s=args.sync_delay_us / 1e6)
    options = set(pyfuse3.default_options)  # default_permissions: the kernel checks modes
    options |= {f"fsname={args.fsname}", "subtype=lossyfs"}
    if args.allow_other:
        options.add("allow_other")
    pyfuse3.init(ops, str(args.mountpoint), options)
    log.info(
        "mounted %s over %s (page size %d, metadata %s)",
        args.mountpoint,
        args.backing,
        args.page_size,
        args.metadata,
    )
    unmounted = False
    try:
        trio.run(Server(ops, args.control).run)
    finally:
        if not ops.dead:
            volume.sync_all()
            log.info("clean shutdown: all cached data written to %s", args.backing)
        # Lazy: clients may still hold files open; they get errors from now on.
        pyfuse3.close(unmount=True)
        unmounted = True
        args.control.unlink(missing_ok=True)
    return 0 if unmounted else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return serve(args)
