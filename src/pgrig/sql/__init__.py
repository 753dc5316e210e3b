"""SQL kept in .sql files, loaded by name."""

from importlib import resources


def load(name: str) -> str:
    return (resources.files(__name__) / f"{name}.sql").read_text()
