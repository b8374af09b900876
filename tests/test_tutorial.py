"""docs/tutorial.ipynb runs top to bottom in a fresh kernel (nbclient, ipykernel: the test extra), and shows what its
text says: the five lines' error next to T7, the comparison's table and figures, the trained models' accuracy."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "tutorial.ipynb"


def _text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        out.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
    return "".join(out)


@pytest.mark.slow
def test_the_tutorial_runs_and_shows_its_results(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not any(o.get("output_type") == "error" for o in c.outputs) for c in code)
    measured, t7 = (float(x) for x in _text(code[0]).split())
    assert t7 == pytest.approx((256 - 1) / 64) and abs(measured - t7) < 0.25
    images = sum("image/png" in o.get("data", {}) for c in code for o in c.outputs)
    assert images >= 3, images  # the curve, the overlay, the frontier
    compared = _text(code[3])
    assert all(name in compared for name in ("Longhorn", "linear", "delta", "lsq")), compared
    trained = _text(code[-1])
    assert "trained accuracy" in trained and "ceiling, random keys" in trained, trained
