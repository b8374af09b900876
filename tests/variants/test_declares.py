"""What a memory declares (lacapacity.variants.declares): the built-ins' declarations agree with what they do, the
wrappers forward them, a memory that declares nothing keeps working, and no module but declares.py reads a memory's
optional members."""

import ast
import dataclasses
from pathlib import Path

import pytest
import torch
from memory_support import UserLinear

from lacapacity import CapacityError, check_variant, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.variants import Declares, heads, precision
from lacapacity.variants._guard import guard
from lacapacity.variants.declares import declared, numel, unaccounted

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(variants.available()))
def test_each_builtin_declares_what_its_state_and_methods_show(name):
    mem = variants.get(name)
    said = declared(mem)
    assert isinstance(said, Declares) and unaccounted(mem) == []
    # a growing state has numel and a state_numel that needs n; a fixed one counts states d x dv matrices at d = dv
    assert (said.state == "growing") == callable(getattr(mem, "numel", None))
    if said.state == "growing":
        with pytest.raises(CapacityError):
            mem.state_numel(16, 16)
    elif name == "cyfa":  # P key rows and P value rows, not d x dv matrices: declares one, holds P (d + dv)
        assert said.states == 1 and mem.state_numel(16, 16) == mem.slots * 32
    else:
        assert said.states == round(mem.state_numel(16, 16) / 256), name
    # a declared bookkeeping field is a field of the state (at any depth)
    fields, todo = set(), [mem.init_state(1, 16, 16)]
    while todo:
        st = todo.pop()
        if dataclasses.is_dataclass(st):
            fields |= {f.name for f in dataclasses.fields(st)}
            todo += [getattr(st, f.name) for f in dataclasses.fields(st)]
    assert set(said.bookkeeping) <= fields, name
    # a declared delta rule reads the last of more than d unit keys back exactly (T12, beta = 1 at the defaults)
    K = keys.make("gaussian", 24, 16, seed=0)
    V = values.make("gaussian", 24, 8, seed=0)
    if said.delta_rule:
        err = (mem.read(mem.write(mem.init_state(1, 16, 8), K, V), K[:, -1:]) - V[:, -1:]).abs().max()
        assert float(err) < 1e-4, name


def test_declared_families_are_the_rules_they_name():
    fam = {n: declared(variants.get(n)).form for n in variants.available()}
    assert {n: f for n, f in fam.items() if f is not None} == {
        "linear": "additive",
        "decay": "decay",
        "delta": "delta",
        "gated_delta": "gated_delta",
        "mamba2": "selective",
        "softmax": "softmax",
        "log_linear": "log_linear",
    }
    # at its parameters: a feature map keeps the family but not T2; normalize_read gives up the linear read
    feat = declared(variants.get("linear", feature="elu1", normalize_read=True))
    assert feat.form == "additive" and feat.additive is False and feat.linear_read is False
    assert declared(variants.get("delta", backend="triton")).differentiable is False


def test_bookkeeping_declared_is_never_rounded_nor_counted():
    assert declared(variants.get("log_linear")).bookkeeping == ("tokens",)
    assert declared(variants.get("mamba3")).bookkeeping == ("clock",)
    assert declared(variants.get("hybrid", state="mamba3")).bookkeeping == ("clock",)
    mem = precision.stored(variants.get("mamba3", dt=0.5), "bfloat16")  # the clock passes 256 steps of 0.5 ...
    K = keys.make("gaussian", 600, 8, seed=0)
    st = mem.write(mem.init_state(1, 8, 4), K, values.make("gaussian", 600, 4, seed=0))
    clock = st.inner.clock.double()  # ... and is not rounded to bfloat16's 8 bits: it keeps its float64 sum
    assert float((clock - clock.to(torch.bfloat16).double()).abs().max()) > 0
    assert precision.state_bytes(variants.get("mamba3"), 8, 4, "bfloat16") == 2 * variants.get("mamba3").state_numel(
        8, 4
    )


def test_wrappers_forward_what_still_holds():
    stored = declared(precision.stored(variants.get("log_linear"), "bfloat16"))
    assert stored.state == "growing" and stored.linear_read is True
    assert stored.additive is False and stored.delta_rule is False and stored.form is None
    split = declared(heads.split(variants.get("linear"), heads=2))
    assert split.linear_read is True and split.additive is False and split.form is None
    assert declared(guard(variants.get("softmax"))) == declared(variants.get("softmax"))
    mem = precision.stored(variants.get("softmax"), "bfloat16")
    st = mem.write(mem.init_state(1, 4, 2), torch.randn(1, 3, 4), torch.randn(1, 3, 2))
    assert numel(mem, st) == 3 * (4 + 2)


_Plain = UserLinear  # a user's additive memory that declares nothing


def test_a_memory_that_declares_nothing_keeps_working():
    assert declared(_Plain()) == Declares()
    K = keys.make("gaussian", 8, 16, seed=0)
    ds = probe.recall(_Plain(), K, values.make("gaussian", 8, 4, seed=0), checkpoints=[8])
    assert "state_numel" not in ds and ds.attrs["feature_dim"] == 16
    report = check_variant(_Plain(), d=16)
    assert report.passed, str(report)
    rows = {r.check: (r.status, r.detail) for r in report.results}
    assert rows["T2 two pairs"][0] == "pass" and "not declared, holds" in rows["T2 two pairs"][1]
    assert rows["T12 last key"][0] == "n/a" and "declare Declares(delta_rule=True)" in rows["T12 last key"][1]
    assert all(v == v for v in report.bounds.values())  # a fixed state: T8 applies undeclared


def test_check_variant_asks_for_a_declaration_that_matches_the_methods():
    class Grows(_Plain):  # keeps every pair, sized by numel, but does not say it grows
        def numel(self, state):
            return 1

    row = check_variant(Grows(), d=16).results[0]
    assert row.check == "protocol" and row.status == "FAIL" and "declare Declares(state='growing')" in row.detail

    class Says(_Plain):
        declares = Declares(state="growing")

    row = check_variant(Says(), d=16).results[0]
    assert row.status == "FAIL" and "has no numel(state)" in row.detail
    for bad in ({"form": "hebbian"}, {"state": "big"}, {"states": 0}, {"linear_read": 1}):
        with pytest.raises(CapacityError, match="Declares: "):
            Declares(**bad)


# the optional members of a memory (capacity/variants/declares.py's docstring); feature maps have a "display" and a
# "label" too, read in capacity/inputs/features.py and capacity/theory/features.py (layers below the memories')
_OPTIONAL = {"declares", "params", "feature_dim", "numel", "state_bytes", "display", "label", "dims"}
_OPTIONAL |= {"additive", "delta_rule", "linear_read", "per_token", "beta", "steps"}
_ALLOWED = {"capacity/variants/declares.py", "capacity/inputs/features.py", "capacity/theory/features.py"}


def _optional_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in _OPTIONAL:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
    return out


def test_only_declares_reads_optional_memory_members():
    files = [p for top in ("capacity", "plots", "studies", "kernels") for p in (ROOT / top).rglob("*.py")]
    found = [r for p in files if str(p.relative_to(ROOT)) not in _ALLOWED for r in _optional_reads(p)]
    assert found == []
    assert _optional_reads(ROOT / "capacity/variants/declares.py")  # the scan sees the reads where they are


def test_the_table_in_docs_memories_is_what_the_memories_declare():
    text = (ROOT / "docs/memories.md").read_text()
    section = text.split("## What each memory declares", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| `")]
    yes = {"yes": True, "no": False}
    shown = {r[0].strip().strip("`"): [c.strip() for c in r[1:]] for r in rows}
    assert set(shown) == set(variants.available())
    for name, (family, additive, delta, linear, state, states) in shown.items():
        said = declared(variants.get(name))
        assert (said.form or "-", said.additive, said.delta_rule) == (family, yes[additive], yes[delta]), name
        assert (said.linear_read, said.state, said.states) == (yes[linear], state, int(states)), name
