"""What `capacity list` prints, read from the source (lacapacity.base.catalog, cli._listed), against the registries."""

import ast
import subprocess
import sys

import pytest

from lacapacity import cli, studies, tasks, variants
from lacapacity.base import catalog, plugins
from lacapacity.errors import CapacityError
from lacapacity.inputs import features, keys, values
from lacapacity.variants import _rounding


def _tasks() -> dict[str, str]:  # each task's description and the fields of its Config, from the classes themselves
    return {
        name: f"{t.description} (fields: {', '.join(t.Config.settable()) or 'none'})"
        if name in tasks.TASKS
        else t.description
        for name, t in tasks._REGISTRY.loaded().items()
    }


REGISTRIES = {
    "studies": studies.available,
    "tasks": _tasks,
    "variants": variants.available,
    "features": features.available,
    "keys": keys.available,
    "values": values.available,
    "formats": lambda: _rounding.FORMATS,
}


def test_every_section_lists_what_its_registry_lists_in_its_order():
    assert list(REGISTRIES) == list(cli.LISTED)
    for section, registry in REGISTRIES.items():
        assert list(cli._listed(section).items()) == list(registry().items()), section


def test_capacity_list_prints_the_registries_without_importing_torch(tmp_path):
    code = (
        "import sys\nfrom lacapacity import cli\nstatus = cli.main(['list'])\n"
        "assert 'torch' not in sys.modules and 'xarray' not in sys.modules, sorted(sys.modules)\nsys.exit(status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    expected = "".join(
        f"{title}:\n" + "".join(f"  {n:{max(map(len, reg()))}}  {d}\n" for n, d in reg().items())
        for title, reg in REGISTRIES.items()
    )
    assert done.stdout == expected


def test_a_plug_in_of_another_package_is_read_from_its_registry(monkeypatch, cli):
    real = plugins.entry_points

    def with_one_more(group):
        extra = {"lacapacity.variants": {"zz_mem": "zzpkg.mem:Mem"}}.get(group, {})
        return {**real(group), **extra}

    monkeypatch.setattr(plugins, "entry_points", with_one_more)
    from lacapacity import cli as command_line

    listed = command_line._listed("variants")
    assert listed["zz_mem"] == "(plug-in zzpkg.mem:Mem)" and list(listed.items()) == list(variants.available().items())
    assert "zz_mem" not in command_line._listed("features")  # another group: the source
    code, out, _ = cli.here("list", "variants")
    assert code == 0 and "zz_mem" in out


def test_each_shape_reads_its_literals_in_the_order_written():
    tree = ast.parse(
        'Study(name="b", description="B")\nStudy("a", "A")\nStudy(name=x, description="no")\n'
        'M = {"k": "K", "e": E(1, 2, "E")}\n'
        'class T:\n    name = "t"\n    description = "T"\n    Config = C\n'
        'class C:\n    kind: ClassVar[str] = "t"\n    vocab: int = 8\n    lr: float = 1.0\n'
    )
    assert catalog.Calls("Study", ("name", 0), ("description", 1)).read(tree) == {"b": "B", "a": "A"}
    assert list(catalog.Calls("Study", ("name", 0), ("description", 1)).read(tree)) == ["b", "a"]
    assert catalog.Dict().read(tree) == {"k": "K"}
    assert catalog.Dict(("description", 2)).read(tree) == {"e": "E"}
    assert catalog.Classes().read(tree) == {"t": "T"}
    assert catalog.Classes(fields=True).read(tree) == {"t": "T (fields: vocab, lr)"}


def test_a_missing_source_is_one_line():
    with pytest.raises(CapacityError, match="no Python source for 'lacapacity.nothing_here'"):
        catalog.source("lacapacity.nothing_here")
    with pytest.raises(CapacityError, match="is not a package"):
        catalog.files("lacapacity.errors", "*.py")
