"""A package's submodules load on first use (lacapacity.base._lazy.submodule, the __getattr__ of lacapacity.base and
lacapacity.inputs): a submodule is imported when read, another name is an AttributeError, and a submodule whose own
import fails raises that failure, not an AttributeError that would hide it."""

import sys

import pytest

from lacapacity.base._lazy import submodule

# a package with the __getattr__ of lacapacity.base and lacapacity.inputs, a submodule that imports, and one whose
# import fails inside it
FILES = {
    "__init__.py": "def __getattr__(name):\n    from lacapacity.base._lazy import submodule\n\n    return submodule(__name__, name)\n",
    "here.py": "VALUE = 7\n",
    "broken.py": "import lazypkg_missing_dependency\n",
}


@pytest.fixture
def package(tmp_path, monkeypatch):
    (tmp_path / "lazypkg").mkdir()
    for name, text in FILES.items():
        (tmp_path / "lazypkg" / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazypkg

    yield lazypkg
    for name in [m for m in sys.modules if m == "lazypkg" or m.startswith("lazypkg.")]:
        del sys.modules[name]


def test_a_submodule_loads_when_read_and_other_names_are_attribute_errors(package):
    assert "lazypkg.here" not in sys.modules
    assert package.here.VALUE == 7 and "lazypkg.here" in sys.modules
    with pytest.raises(AttributeError, match=r"^module 'lazypkg' has no attribute 'nope'$"):
        package.nope  # noqa: B018
    assert not hasattr(package, "nope")


def test_a_submodule_whose_import_fails_raises_its_own_error(package):
    with pytest.raises(ModuleNotFoundError, match="lazypkg_missing_dependency"):
        package.broken  # noqa: B018


def test_the_base_and_inputs_layers_load_their_submodules_so():
    import lacapacity

    assert lacapacity.inputs.keys.__name__ == "lacapacity.inputs.keys"
    assert lacapacity.base.labels.__name__ == "lacapacity.base.labels"
    with pytest.raises(AttributeError, match="module 'lacapacity.inputs' has no attribute 'nope'"):
        lacapacity.inputs.nope  # noqa: B018
    assert submodule("lacapacity.base", "labels") is lacapacity.base.labels
