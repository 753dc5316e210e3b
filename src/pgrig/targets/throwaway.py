"""What every kind with a throwaway cluster shares: the checks of binaries,
profile, tablespaces and disk, and the cluster itself (initdb, profile, start,
database, tablespaces), removed after - or kept, stopped, when asked or when the
server did not come back after a crash (the evidence).

A kind changes where the cluster goes through the hooks of ``Throwaway``
(``_root``, ``_profile``, ``_before_start``, ``_close``, ``_on_disk``): the lossy
kind makes it in a backing directory and runs it on a FUSE mount.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pgrig import files, ownership, proc
from pgrig.cluster import aio, compat, fsyncgate, profiles, startable, workdir
from pgrig.cluster.server import (
    Cluster,
    InitdbOptions,
    checking_os_user,
    server_os_user,
)
from pgrig.errors import BinaryNotFound, PgrigError, UsageError, WorkdirError
from pgrig.hosts.executor import C_LOCALE, Executor
from pgrig.hosts.local import HERE
from pgrig.ownership import Found, Leaves
from pgrig.pgsource import binaries, catalog
from pgrig.registry.target import (
    OWN_CONNECTIONS,
    Checked,
    Demands,
    StateT,
    Target,
    TargetKind,
    as_written,
    capture,
    directory_option,
    settings_option,
)
from pgrig.ui import Ui
from pgrig.workdb import DATABASE

if TYPE_CHECKING:
    from pgrig.registry.target import TargetSpec


def find_binaries(spec: TargetSpec, tools: tuple[str, ...]) -> binaries.PgBinaries:
    """The target's binaries; a version (``pg_bin = "9.6"``, the versions axis) not
    in the cache yet is installed now, before anything else is created - and said
    (what, from where, how big, how long)."""
    try:
        return binaries.find(spec.pg_bin, tools=tools)
    except BinaryNotFound:
        if spec.pg_bin is None or not binaries.looks_like_version(spec.pg_bin):
            raise
    catalog.install(str(spec.pg_bin), ui=Ui())
    return binaries.find(spec.pg_bin, tools=tools)


# PostgreSQL's default when no profile sets it (unchanged since 8.x).
DEFAULT_MAX_CONNECTIONS = 100
# The most the server accepts (MAX_BACKENDS, 2^18 - 1, less its own processes).
MAX_CONNECTIONS = 262_143


def connections_fit(spec: TargetSpec, profile: profiles.Profile, demands: Demands) -> None:
    """The workload's clients and pgrig's own against the max_connections its
    profile and ``set`` give the cluster: refused now, not at connect time."""
    if not demands.clients:
        return
    value = profile.settings.get("max_connections")
    try:
        limit = int(value) if value is not None else DEFAULT_MAX_CONNECTIONS
    except ValueError:
        return  # the server's parser (profiles.validate) already refused what is not a number
    need = demands.clients + OWN_CONNECTIONS
    if need <= limit:
        return
    room = -(-need // 100) * 100  # the next hundred: room for a monitoring session or two
    if room > MAX_CONNECTIONS:  # it suggested max_connections=100000000100
        raise UsageError(
            f"target {spec.name}: workload {demands.clients_of} opens {demands.clients:,} client "
            f"connections: PostgreSQL allows at most {MAX_CONNECTIONS:,}",
            hint="fewer clients (a few per CPU core saturate a server)",
        )
    raise UsageError(
        f"target {spec.name}: workload {demands.clients_of} opens {demands.clients} client "
        f"connections (+{OWN_CONNECTIONS} of pgrig's own), but max_connections is {limit} "
        f"(profile {profile.name}"
        + (", set" if "max_connections" in spec.settings else "")
        + "): those runs would fail at connect time",
        hint=f"--set max_connections={room}, or fewer --clients"
        if demands.source == "command line"
        else f"add set = {{ max_connections = {room} }} to target {spec.name} in "
        f"{demands.source}, or lower the workload's clients",
    )


def check_pgoptions() -> None:
    """PGOPTIONS naming a setting no PostgreSQL has: libpq sends it with every
    connection pgrig and pgbench open, and the server refuses each one. It failed
    the study at its first connection, after the cluster was made (exit 1)."""
    text = os.environ.get("PGOPTIONS", "")
    words = text.split()
    for at, word in enumerate(words):
        setting = words[at + 1] if word == "-c" and at + 1 < len(words) else None
        if word.startswith(("-c", "--")) and word not in ("-c", "--"):
            setting = word[2:]
        name = setting.partition("=")[0].replace("-", "_") if setting else ""
        if name and "." not in name and compat.span(name) is None:
            raise UsageError(
                f"PGOPTIONS={text!r}: {name} is no PostgreSQL setting, and libpq sends it"
                " with every connection pgrig and pgbench open: the server would refuse them",
                hint="unset PGOPTIONS, or fix the name (set server settings with --set)",
            )


def no_named_tablespace(spec: TargetSpec, source: str) -> None:
    """A cluster pgrig creates has pg_default alone: a tablespace named, not a
    directory, failed every TPC-B load at ``CREATE TABLE ... TABLESPACE`` (issue 33)."""
    for option in ("tablespace", "index_tablespace"):
        value = getattr(spec, option)
        if value and "/" not in value and value != "pg_default":
            written = as_written(spec, source, option, "--" + option.replace("_", "-"))
            raise UsageError(
                f"{written} {value!r}: the cluster pgrig creates has no such tablespace "
                "(only pg_default)",
                hint="give a directory (an absolute path): pgrig makes the tablespace there; "
                "a tablespace name is for a target with dsn (an existing server)",
            )


def norm_locale(name: str) -> str:
    """A locale name as glibc lists it (``C.UTF-8`` is ``C.utf8``)."""
    lang, _, codeset = name.partition(".")
    codeset, _, modifier = codeset.partition("@")
    codeset = codeset.lower().replace("-", "")
    return lang + ("." + codeset if codeset else "") + ("@" + modifier if modifier else "")


def locale_exists(name: str, host: Executor) -> bool:
    """Whether ``host`` (where initdb runs) has the locale ``name``."""
    if name in ("C", "POSIX") or norm_locale(name) in ("C.utf8",):
        return True
    try:
        done = host.run(["locale", "-a"], timeout=30, env=C_LOCALE, check=False, what="locale")
    except (PgrigError, OSError):  # no locale(1) there: initdb will say
        return True
    if done.returncode != 0:
        return True
    known = {norm_locale(line.strip()) for line in done.stdout.splitlines() if line.strip()}
    return norm_locale(name) in known


def initdb_options(spec: TargetSpec, waldir: Path | None = None) -> InitdbOptions:
    """``[target.initdb]`` as initdb takes it (``waldir``: ``--waldir``, the
    cluster's WAL elsewhere; a server on a host keeps its own)."""
    init = spec.initdb
    return InitdbOptions(
        encoding=init.encoding,
        locale=init.locale,
        wal_segsize_mb=init.wal_segsize_mb,
        data_checksums=init.data_checksums,
        waldir=waldir,
    )


# PostgreSQL's server encodings (``initdb --encoding``), as the documentation
# lists them; initdb accepts their aliases in any case.
_ENCODING_NAMES = (
    "SQL_ASCII UTF8 UNICODE EUC_JP EUC_CN EUC_KR EUC_TW EUC_JIS_2004 ISO_8859_5 ISO_8859_6 "
    "ISO_8859_7 ISO_8859_8 KOI8R KOI8 KOI8U LATIN1 LATIN2 LATIN3 LATIN4 LATIN5 LATIN6 LATIN7 "
    "LATIN8 LATIN9 LATIN10 MULE_INTERNAL WIN866 WIN874 WIN1250 WIN1251 WIN1252 WIN1253 "
    "WIN1254 WIN1255 WIN1256 WIN1257 WIN1258 ALT WIN ISO88591 ISO88592 ISO88593 ISO88594 "
    "ISO88595 ISO88596 ISO88597 ISO88598 ISO88599 ISO885910 ISO885913 ISO885914 ISO885915 "
    "ISO885916 UTF_8 ABC TCVN TCVN5712 VSCII"
)
SERVER_ENCODINGS = frozenset(_ENCODING_NAMES.split())


def initdb_encoding(spec: TargetSpec, source: str) -> None:
    """initdb's encoding and locale, which it would refuse only after the study
    began: an encoding PostgreSQL does not know, or one that does not go with the
    locale (a target whose kind creates its server; asked of the campaign before
    any target's check). Whether the locale exists is ``initdb_locale``'s: asked
    of the server's host."""
    init = spec.initdb
    if init.encoding.upper().replace("-", "_") not in SERVER_ENCODINGS and (
        init.encoding.upper().replace("-", "") not in SERVER_ENCODINGS
    ):
        raise UsageError(
            f"{as_written(spec, source, 'encoding')} {init.encoding!r} is not a PostgreSQL "
            "server encoding",
            hint="e.g. UTF8, SQL_ASCII or LATIN1 (the PostgreSQL docs' 'Character Set Support')",
        )
    # initdb's own check (SQL_ASCII goes with any locale): LATIN1 with C.UTF-8 made
    # a study, then failed in initdb
    encoding = init.encoding.upper().replace("-", "").replace("_", "")
    codeset = norm_locale(init.locale).partition(".")[2].partition("@")[0]
    if codeset and encoding != "SQLASCII" and (codeset == "utf8") != (encoding == "UTF8"):
        raise UsageError(
            f"{as_written(spec, source, 'encoding')} {init.encoding!r} does not match the "
            f"locale {init.locale!r} (initdb refuses them together)",
            hint=f"an encoding that matches {init.locale} (UTF8 for a UTF-8 locale), or the"
            " locale C, which takes any",
        )


def initdb_locale(spec: TargetSpec, source: str, host: Executor) -> None:
    """initdb refuses a locale its host lacks only after the study began: asked of
    the host the server runs on (a remote server's, not this machine's)."""
    locale = spec.initdb.locale
    if not locale_exists(locale, host):
        raise UsageError(
            f"{as_written(spec, source, 'locale')} {locale!r}: {host.where} has no such locale",
            hint=f"C or C.UTF-8 always exist; `locale -a` on {host.where} lists the others "
            "(Debian: dpkg-reconfigure locales)",
        )


class Throwaway(TargetKind[None, StateT]):
    """A cluster pgrig creates in the target's directory and removes after."""

    clean_rank = 20  # work directories: after the mounts inside them, before the lab's
    leaves = Leaves(records=(workdir.RECORDS, ownership.FILES), scratch=(workdir.SOCKET_PREFIX,))

    def machine(self, spec: TargetSpec) -> profiles.Machine | None:
        """What ``{ram}`` and ``{cpus}`` of a profile mean; None: this machine."""
        return None

    def check_uninstalled(self, spec: TargetSpec, source: str, notes: list[str]) -> None:
        initdb_locale(spec, source, HERE)  # this machine's: no binaries needed
        notes.append(
            f"target {spec.name}: PostgreSQL {spec.pg_bin} is not installed yet: its "
            "profile and settings were not checked; `pgrig run` checks them once it has "
            "installed it"
        )

    def check(self, spec: TargetSpec, demands: Demands, notes: list[str]) -> Checked:
        check_pgoptions()
        initdb_locale(spec, demands.source, HERE)
        bins = find_binaries(spec, binaries.SERVER_TOOLS)
        directory = (
            workdir.check_target(spec.directory, option=directory_option(spec, demands.source))
            if spec.directory
            else None
        )
        profile = profiles.load(spec.profile, machine=self.machine(spec))
        profile = profile.with_overrides(spec.settings, settings_option(spec, demands.source))
        try:
            os_user = checking_os_user(spec.os_user)
        except UsageError as exc:
            written = as_written(spec, demands.source, "os_user", "--os-user")
            raise UsageError(f"{written} {exc.message}", hint=exc.hint) from None
        aio.check_io_method(spec.name, profile.settings, bins, os_user)
        startable.rlimits(profile)  # before validate: its postgres -C fails under them
        adapted = profiles.validate(profile, bins, os_user, segment_mb=spec.initdb.wal_segsize_mb)
        startable.check(profile, bins, os_user, self.machine(spec) or profiles.Machine.this())
        for dropped in adapted.dropped:
            if dropped.name in dict(spec.axes):  # the variants would all be the same server
                raise UsageError(
                    f"target {spec.name}: the axis {dropped.name} cannot vary on PostgreSQL "
                    f"{bins.version}: {dropped.reason}",
                    hint=f"compare {dropped.name} on the versions that have it only",
                )
        for note in adapted.notes:  # a setting this major renamed or lacks: never silent
            notes.append(f"target {spec.name} (PostgreSQL {bins.version}): {note}")
        if (gate := fsyncgate.warning(bins.version, bins.version_num)) is not None:
            notes.append(f"target {spec.name}: {gate}")  # an old minor: fsyncgate
        for note in profile.scaled:  # a seed's value this machine cannot hold: never silent
            notes.append(f"target {spec.name}: profile {profile.name} scaled: {note}")
        no_named_tablespace(spec, demands.source)
        for option in ("tablespace", "index_tablespace"):
            value = getattr(spec, option)
            if value and value.startswith("/"):
                flag = "--" + option.replace("_", "-")
                where = workdir.check_target(Path(value), what=f"{option} directory", option=flag)
                files.check_space(where, demands.need_bytes, f"target {spec.name} ({option})")
        if spec.wal_directory is not None:  # missing: exit 4 after initdb began; now 2
            written = as_written(spec, demands.source, "wal_directory")
            workdir.check_target(spec.wal_directory, what=written, option="wal_directory")
        if directory is not None:
            files.check_space(directory, demands.need_bytes, f"target {spec.name}")
        connections_fit(spec, profile, demands)
        return Checked(
            bins, profile, directory, owned=True, adapted=adapted.notes,
            where=self.where(spec)[0],
        )  # fmt: skip

    def clean(self, study: str | None, others: list[str], found: Found) -> list[str]:
        said: dict[str, str] = {}  # why a pgrig that lived on left one (a read-only target)
        removed = workdir.clean_orphans(study=study, left=others, said=said)
        return [
            f"removed the orphan work directory {path} " + said.get(path, "of a killed pgrig run")
            for path in removed
        ]

    # -- the cluster -------------------------------------------------------

    def _root(self, t: Target, name: str, study: str, ui: Ui, scope: contextlib.ExitStack) -> Path:
        """Where the cluster's work directory is made (what a kind makes for it
        is in the Context for ``scope``)."""
        assert t.directory is not None
        return t.directory

    def _profile(self, t: Target) -> profiles.Profile:
        assert t.profile is not None
        return t.profile

    def _before_start(self, t: Target, cluster: Cluster) -> Cluster:
        """Made and configured, not started yet: the cluster to start."""
        return cluster

    def _close(self, t: Target, *, keep: bool) -> None:
        """After the cluster is gone (or kept)."""

    def _on_disk(self, t: Target, path: Path) -> Path:
        """Where a kept file of the cluster is once the study is over."""
        return path

    @contextlib.contextmanager
    def server(
        self, t: Target, name: str, study: str, ui: Ui, *, keep: Callable[[], bool]
    ) -> Iterator[None]:
        os_user = server_os_user(t.spec.os_user)
        # The Context with the cluster (and a kind's own: the lossy mount) for the
        # server's life (``Target.scoped``), as the remote kind's server; a load
        # restarts it as ``restartable`` there.
        with contextlib.ExitStack() as scope:
            root = self._root(t, name, study, ui, scope)
            try:
                cluster = Cluster.create(
                    t.bins, root / name, study=study, os_user=os_user, tcp=t.spec.listen == "tcp"
                )
            except BaseException:
                self._close(t, keep=False)
                raise
            t.live.cluster = t.live.server = cluster
            try:
                scope.enter_context(t.scoped(cluster=cluster, restartable=cluster))
                with ui.step(f"{t.name}: initdb + start PostgreSQL {t.bins.version}"):
                    cluster = self._make(t, cluster, name, scope)
                _make_tablespaces(t, ui)
                overrides = ", ".join(f"{k}={v}" for k, v in t.spec.settings.items())
                assert t.profile is not None
                ui.ok(
                    f"{t.name}: PostgreSQL {t.bins.version} running as "
                    f"{os_user.name if os_user else 'you'} in {cluster.datadir} "
                    f"(profile {t.profile.name}{', ' + overrides if overrides else ''})"
                )
                capture(t)
                yield
            finally:
                kept = keep() or t.lost is not None
                # A signal now would leave the work directory, or a kind's mount and
                # its FUSE daemon (issue 19's power-loss teardown): it waits for the end.
                with proc.signals_deferred():
                    try:
                        self._dispose(t, t.live.cluster or cluster, kept, ui)
                    finally:
                        self._close(t, keep=kept)

    def _make(self, t: Target, cluster: Cluster, name: str, scope: contextlib.ExitStack) -> Cluster:
        os_user = server_os_user(t.spec.os_user)
        waldir = None
        if t.spec.wal_directory is not None:
            holder = workdir.make_extra_dir(
                cluster.workdir, t.spec.wal_directory.resolve() / f"{name}-wal", os_user
            )
            waldir = holder / "pg_wal"
        cluster.initdb(initdb_options(t.spec, waldir))
        cluster.configure(self._profile(t))
        cluster.cgroups = t.live.cgroups
        cluster = self._before_start(t, cluster)  # another path: the lossy mount's
        t.live.cluster = t.live.server = cluster
        scope.enter_context(t.scoped(cluster=cluster, restartable=cluster))
        cluster.start()
        with cluster.admin().connect() as db:
            db.execute(f'CREATE DATABASE "{DATABASE}"')
        scope.enter_context(t.scoped(conn=cluster.conn(DATABASE), scratch=cluster.workdir))
        t.ctx.running.server_pid = cluster.postmaster_pid()
        return cluster

    def _dispose(self, t: Target, cluster: Cluster, kept: bool, ui: Ui) -> None:
        """Remove the cluster - or keep it, stopped, when asked or when a crash left
        it down for good (the evidence)."""
        said = partial(_hung, ui, t.name)
        if not kept:
            try:
                cluster.destroy(said)
            except WorkdirError as exc:  # a read-only target: said, the study ends as it is
                ui.fail(f"{t.name}: {exc}")
                if exc.hint:
                    ui.warn(exc.hint)
            return
        try:
            cluster.stop(said=said)
        finally:
            workdir.unregister(cluster.workdir)
        why = "--keep" if t.lost is None else "the server did not come back"
        t.live.kept = (self._on_disk(t, cluster.datadir), self._on_disk(t, cluster.logfile))
        ui.info(f"{t.name}: kept ({why}): data directory {t.live.kept[0]}, log {t.live.kept[1]}")

    def describe(self, t: Target) -> dict[str, object]:
        return {"kind": self.name, "adapted": list(t.checked.adapted)}


def _hung(ui: Ui, target: str, message: str) -> None:
    ui.warn(f"{target}: {message}")


def _make_tablespaces(t: Target, ui: Ui) -> None:
    """Directories given as tablespaces become tablespaces of the throwaway
    cluster; the TPC-B steps then use their names."""
    assert t.cluster is not None
    names: dict[str, str] = {}
    for option, name in (("tablespace", "pgrig_tables"), ("index_tablespace", "pgrig_indexes")):
        value = getattr(t.spec, option)
        if value and value.startswith("/"):
            names[option] = t.cluster.create_tablespace(name, Path(value))
            ui.ok(f"{t.name}: tablespace {name} in {value}")
    t.live.tablespaces = {
        "tablespace": names.get("tablespace", t.spec.tablespace),
        "index_tablespace": names.get("index_tablespace", t.spec.index_tablespace),
    }
