"""pgrig: reproducible PostgreSQL + storage studies."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__version__ = "0.1.0"


def lazily(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """A package's ``__getattr__`` (PEP 562) that imports each of its names from
    the module ``where`` says defines it, and a submodule by its name, when
    first asked: importing one small module of a package (the storage lab's
    ``throttle``, the monitor's ``procfs``) no longer runs the whole package's
    imports (psycopg, the storage lab's targets), which cost the commands'
    ``--help`` their 0.3 s of CPU."""

    def __getattr__(name: str) -> object:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
