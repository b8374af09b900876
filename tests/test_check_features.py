"""The rows of T25-T30 in `capacity check` fail when their closed form is off by 3% (that they hold is
tests/test_check_cli.py's `test_every_check_holds`).

One run per theorem with all its functions scaled by 1.03; each function's own row (found by its text) must fail.
"""

import pytest

from capacity import check, theory

ROWS = {  # theorem -> {function: a piece of the text of the row that calls it}
    "T25": {"polynomial_kernel_error": "taylor2"},
    "T26": {"relu_feature_error": "relu,", "elu1_feature_error": "elu1,"},
    "T27": {"dpfp_error": "dpfp"},
    "T28": {"performer_error": "performer"},
    "T29": {"softmax_error": "mse =", "softmax_weight": "signal =", "exp_kernel_error": "exp(2 scale"},
    "T30": {"recall_at_refined": "refined prediction"},
}


@pytest.mark.parametrize("theorem", list(ROWS))
def test_a_formula_off_by_three_percent_fails_its_row(monkeypatch, theorem):
    for name in ROWS[theorem]:
        true = getattr(theory, name)
        monkeypatch.setattr(theory, name, lambda *a, _f=true, **k: 1.03 * _f(*a, **k))
    rows = check.run_checks(seed=0, only=[theorem])
    for name, text in ROWS[theorem].items():
        mine = [r for r in rows if text in r.what]
        assert mine and not any(r.passed for r in mine), (name, check.format_table(mine))
