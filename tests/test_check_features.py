"""The rows of T25-T30 in `capacity check`: each holds, and each fails when its closed form is off by 3%."""

import pytest

from capacity import check, theory

ROWS = {
    "T25": ["polynomial_kernel_error"],
    "T26": ["relu_feature_error", "elu1_feature_error"],
    "T27": ["dpfp_error"],
    "T28": ["performer_error"],
    "T29": ["softmax_error", "softmax_weight", "exp_kernel_error"],
    "T30": ["recall_at_refined"],
}


@pytest.fixture(scope="module")
def rows():
    return check.run_checks(seed=0, only=list(ROWS))


def test_the_feature_softmax_and_topk_rows_hold(rows):
    assert rows and all(r.passed for r in rows), check.format_table(rows)
    assert {r.theorem for r in rows} == set(ROWS)


@pytest.mark.parametrize("theorem,name", [(t, n) for t, names in ROWS.items() for n in names])
def test_a_formula_off_by_three_percent_fails_its_row(monkeypatch, theorem, name):
    true = getattr(theory, name)
    monkeypatch.setattr(theory, name, lambda *a, **k: 1.03 * true(*a, **k))
    bad = [r for r in check.run_checks(seed=0, only=[theorem]) if not r.passed]
    assert bad, f"{name} x 1.03 passes every {theorem} row"
