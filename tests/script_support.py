"""Load a script (benchmarks/, scripts/, docs/scripts/) as a module, as ``python <script>`` would see it.

A script run as ``python benchmarks/x.py`` has its own folder first on ``sys.path`` and imports the scripts beside
it by name; ``load_script`` gives it that folder only while it runs, so that the test process's ``sys.path`` is left
as it was (a folder of scripts on it shadows packages: ``benchmarks/kernels.py`` would hide the ``kernels``
package that ``transformers`` looks for).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """The script at ``path`` imported as the module ``name`` (registered in ``sys.modules``); its ``main()`` does
    not run."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    folder = str(path.parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module
