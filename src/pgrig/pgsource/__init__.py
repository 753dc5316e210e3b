"""PostgreSQL majors 9.5 to 18 on one machine: the system's packages, pgrig's cache,
and builds a registry offers (Maven Central, PyPI) installed into that cache.

    catalog.py   the API: list_versions(), install("9.6"), resolve("9.6"), SOURCES
    system.py    PostgreSQL the system's packages installed
    cache.py     pgrig's cache of downloaded builds, and the verified install
    base.py      the one interface a source fills; maven.py and pypi.py fill it
    binaries.py  PgBinaries: one PostgreSQL's bin directory, and resolve()
    cli.py       ``pgrig pg``

This file imports nothing: ``binaries`` uses ``system`` and ``cache`` at
module level, and ``catalog`` uses ``binaries`` - importing the package
must not pull one into the other. See docs/versions.md.
"""
