"""pgrig: reproducible PostgreSQL + storage studies."""

__version__ = "0.1.0"
