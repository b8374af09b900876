"""The package's version, written here once (``lacapacity.__version__`` points here): setuptools reads it from this
file without importing the package (pyproject.toml), and every layer that records it imports it from here."""

__version__ = "0.1.0"
