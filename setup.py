"""The list of packages, found rather than written by hand (everything else is in pyproject.toml).

``capacity/`` and every package under it, installed as ``lacapacity`` (the import name: README, "Names"), plus
``kernels/``, ``plots/`` and ``studies/`` with every package under them, installed inside it (``lacapacity.kernels``,
...) through ``package-dir`` in pyproject.toml. A folder with an ``__init__.py`` is a package and lands in the wheel
without being listed; tests/test_wheel.py fails when one is missing from a built wheel.
"""

from setuptools import find_packages, setup

# the top-level folders installed under another name: folder -> package (the same mapping as pyproject.toml's
# [tool.setuptools.package-dir], which tells setuptools where each package's files are)
MAPPED = {
    "capacity": "lacapacity",
    "kernels": "lacapacity.kernels",
    "plots": "lacapacity.plots",
    "studies": "lacapacity.studies",
}


def packages() -> list[str]:
    found: list[str] = []
    for folder, name in MAPPED.items():
        found += [name, *(f"{name}.{sub}" for sub in find_packages(where=folder))]
    return sorted(found)


setup(packages=packages())
