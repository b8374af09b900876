"""capacity/data/catalog.json (what `capacity list` prints without importing torch) against the registries."""

import json
import subprocess
import sys

from capacity import studies, variants
from capacity.base import catalog, plugins
from capacity.inputs import features, keys, values

REGISTRIES = {
    "studies": studies.available,
    "variants": variants.available,
    "features": features.available,
    "keys": keys.available,
    "values": values.available,
}


def test_the_catalog_file_is_what_the_registries_say():
    written = json.loads(catalog.PATH.read_text(encoding="utf-8"))
    assert written == catalog.build(), "capacity/data/catalog.json is stale: run python -m capacity.base.catalog"
    assert list(written) == list(catalog.SECTIONS)


def test_every_section_lists_what_its_registry_lists_in_its_order():
    for section, registry in REGISTRIES.items():
        assert list(catalog.available(section).items()) == list(registry().items()), section


def test_capacity_list_prints_the_registries_without_importing_torch(tmp_path):
    code = (
        "import sys\nfrom capacity import cli\nstatus = cli.main(['list'])\n"
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
        extra = {"capacity.variants": {"zz_mem": "zzpkg.mem:Mem"}}.get(group, {})
        return {**real(group), **extra}

    monkeypatch.setattr(plugins, "entry_points", with_one_more)
    listed = catalog.available("variants")
    assert listed["zz_mem"] == "(plug-in zzpkg.mem:Mem)" and list(listed.items()) == list(variants.available().items())
    assert "zz_mem" not in catalog.available("features")  # another group: the file
    code, out, _ = cli.here("list", "variants")
    assert code == 0 and "zz_mem" in out


def test_without_the_file_the_registry_answers(monkeypatch, tmp_path):
    monkeypatch.setattr(catalog, "PATH", tmp_path / "missing.json")
    assert catalog.available("keys") == keys.available()
