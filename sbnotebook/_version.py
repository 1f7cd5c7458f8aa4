"""The kit's version: the one place it is written (pyproject.toml reads it from this file's text;
docs/releasing.md). A module of its own so that anything may import it without importing the package."""

__version__ = "0.2.0.dev0"
