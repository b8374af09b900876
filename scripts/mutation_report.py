"""Scores and surviving mutants of scripts/mutation.sh runs, as Markdown.

    .venv/bin/python scripts/mutation_report.py DIR [DIR ...]

Each DIR is a target's run directory ($WORK/<target>). Several directories of the same target (a full run, then
runs of its survivors with more tests: ``MUTANTS=... scripts/mutation.sh``) are merged: a mutant counts as killed
if any run killed it, and as tested if any run tested it. Prints the score per file and, for every mutant not
killed, its status and diff.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import defaultdict


@contextlib.contextmanager
def _cwd(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


# Why a mutant survives, by what it changes (regular expressions on "name: diff"), first match wins. Each reason
# says why no test can tell the mutant apart (an equivalent mutant) or what a test would need (a GPU, two devices).
REASONS = [
    (
        r"x_(argmax|topk)_correct__mutmut_\d+: \+[^|]*(device=None\)|arange\(c, \)|numel\(\), \)|tensor\(ks, \)|dtype=torch\.bool, \))",
        "needs a CUDA device: made without r's device, the tensor is still on r's device on the CPU (the same program);"
        " on CUDA it would be made on the CPU, which only tests/test_decode.py::test_cuda_screens_match_the_exact_decode"
        " (skipped without a GPU) can see",
    ),
    (
        r"must be on one device",
        "needs two devices: without a GPU every tensor that holds numbers is on 'cpu' (_validate.tensor refuses meta"
        " tensors before this check)",
    ),
    (
        r"x_rounding_crossover",
        "a test to add: rounding_crossover over an array of (d, dv), with its defaults, and a crossing in the first"
        " grid points (its tests call it for one d = dv, stochastic and round-to-nearest)",
    ),
    (
        r"x_final_rounding_error.*memory: str = \"linear\", (alpha=2\.0, beta=1\.0|alpha=1\.0, beta=2\.0)",
        "equivalent: the defaults of alpha and beta are read only by the decaying and delta memories, whose callers"
        " pass them; the default memory (linear) ignores both",
    ),
    (
        r"x_delta_rounding_floor.*mem = \"delta\" if (\(float\(alpha\) == 1\.0\) and False|float\(alpha\) == 2\.0) else",
        "equivalent: the gated delta rule at alpha = 1 is the delta rule (both take alpha = 1 in every function of the"
        " model), so choosing it always gives the same floor",
    ),
    (
        r"x_(decay|delta)_rounding_floor.*n = np\.ceil\(4[01]\.0 / \(1\.0 - (a \* a|c)\)\) [+-] [12]\b",
        "equivalent: the floor is the step-rounding error at an n with c^n <= e^-40; one step or 2.5% more or fewer"
        " moves it by a relative e^-39 (tests/test_theory_quadrature.py holds it to the limit to 1e-9)",
    ),
    (
        r"x_decay_readout.*torch\.arange\(n - 1, -1, -1, dtype=K\.dtype, (device=None)?\)",
        "needs a CUDA device: on the CPU, the default device of torch.arange is K's device",
    ),
    (
        r"x_decay_readout.*np\.arange\(n - 1, -1, -1, (dtype=None)?\)",
        "equivalent: g is a Python float, so g ** k is float64 for integer exponents k as well",
    ),
    (
        r"x_feature_crosstalk.*polynomial_kernel_error\(2, d, \[0\.0, 2\.0\]\)",
        "equivalent: normalised features of twice the identity kernel are those of the kernel (its scale cancels)",
    ),
    (
        r"x_welch_bound.*errstate",
        "equivalent: after the input check nothing in the bound can divide by zero or go negative",
    ),
    (
        r"x_bill.*0 [*/] n",
        "equivalent: `0 * n` only broadcasts to n's shape; `- 0 * n` and `0 / n` (n >= 1) are the same zeros",
    ),
    (r"x__mT.*and False", "equivalent: np.swapaxes also transposes a torch tensor (it calls Tensor.swapaxes)"),
    (r"x_crosstalk_error.*shape\[-2\]", "equivalent: the Gram matrix is square"),
    (r"x__out.*asarray\(x, (dtype=None)?\)", "equivalent: every caller passes float64 arrays already"),
    (
        r"x__numbers.*isinstance\(x, torch\.Tensor\)\) and False",
        "equivalent on the CPU: np.asarray reads a CPU tensor directly (a CUDA tensor needs .cpu(); no GPU in the tests)",
    ),
    (
        r"x__delta_trajectory.*zeros_like\(None\)",
        "equivalent: zeros_like(None) is a 0-d zero, which broadcasts like zeros_like(d)",
    ),
    (
        r"x_delta_rule_error.*asarray\(beta",
        "equivalent: beta's values are checked and enter only through float arithmetic",
    ),
    (r"x_delta_rule_error.*asarray\(dv, (dtype=None)?\)", "equivalent: dv only broadcasts (its dtype does not matter)"),
    (
        r"x__refined_one.*(linspace|roots_genlaguerre|_coordinate_nodes\(d, 4)|x__coordinate_nodes",
        "equivalent within the quadrature's accuracy: a node count or range changes the refined model by less than its"
        " 2e-5 agreement with a finer quadrature (tests/test_theory_exact.py)",
    ),
    (
        r"x_argmax_recall.*quad_vec\(integrand, -1[23]\.0, 1[23]\.0, epsabs=1e-10, (epsrel=1e-8)?\)|x_argmax_recall.*quad_vec\(integrand, -12\.0, 12\.0, epsrel",
        "equivalent within the integrator's accuracy: the integrand is below 1e-31 past |z| = 12, and scipy's defaults are tighter",
    ),
    (
        r"x__solve_capacity.*(lo = |step = |lo -= |lo \+= |lo = step|f\(lo\) <= 0|f\(hi\) > 0|brentq\(f, lo, hi, \))|x_argmax_capacity_refined.*start",
        "equivalent: the bracket's start and step change how fast the same root is bracketed (recall decreases in n)",
    ),
    (
        r"np\.clip\(.*(None|2\.0)\)|np\.clip\(.*, None, 1\.0\)|np\.clip\(value, None",
        "equivalent: the value already lies in [0, 1]",
    ),
    (
        r"minimum\(tail, [12]\.0 [-+] 1e-16\)",
        "equivalent: tail <= 1, and (1 - tail)^(n - 1) underflows to 0 either way at tail = 1",
    ),
    (
        r"\.(sum|amax|argmax)\(\+1[,)]",
        "equivalent: the array has two dimensions there, so axis 1 is axis -1",
    ),
    (
        r"x__refined_one.*n < 1|x_argmax_recall.*(n < 1|where\(None)",
        "equivalent: n = 1 gives recall 1 through the general formula too",
    ),
    (r"x_argmax_recall.*1\.0 - sigma_c \* z", "equivalent: z is symmetric about 0 (a Gaussian over [-12, 12])"),
    (
        r"x_argmax_capacity_refined.*(tau < 1|d < 2\) and|np\.any\(None\))",
        "equivalent: argmax_capacity (its start) and argmax_recall_refined check tau, d and dv again, with the same messages",
    ),
    (
        r"x_(_inputs|argmax_correct|topk_correct)__mutmut_\d+: \+ *(block|step) = max\(2, ",
        "not tested (too large for the suite): max(2, ...) differs from max(1, ...) only where the budget leaves"
        " fewer than 2 reads per screen block (B c > 2^23 reads) or per float64 chunk (c > 2^21 values); there the"
        " same reads are scored 2 at a time instead of 1: the same answer, half the products",
    ),
    (
        r"x__inputs__mutmut_\d+: \+ *own_err = _gamma_k\(dv, _U_SUM\) (\* \(1 - 2 \* _gamma_k\(dv \+ 2|"
        r"\* \(1 \+ 3 \* _gamma_k\(dv \+ 2|\* \(1 \+ 2 \* _gamma_k\(dv - 2|\* \(1 \+ 2 \* _gamma_k\(dv \+ 3|"
        r"/ \(1 \+ 2 \* _gamma_k\(dv \+ 2, _U_SUM\)\) \*\* 2|.*_U_SUM\)\) \*\* 3)",
        "not killed (a test would need a margin within 2e-5 of its allowance): this moves the own score's rounding"
        " allowance by a relative 4 (dv + 3) 2^-23 or less (1.7e-5 at dv = 32). The answer is exact either way (the"
        " allowances are 4 times the worst rounding: bound_scale 2, and u = 2^-23 is twice float32's unit"
        " roundoff); only a read whose float32 margin lies in that sliver of its allowance would change stage, and"
        " no test read does (tests/test_decode.py::test_the_screen_decides_exactly_the_reads_outside_twice_the_"
        "derived_bound places margins at 0.75 and 1.25 times it)",
    ),
    (
        r"x__classify__mutmut_\d+: \+ *pos = other > 0",
        "equivalent: at other = 0 (or -0.0) both branches give other / (1 -+ u_out) = the same signed zero",
    ),
    (
        r"x_topk_correct__mutmut_\d+: \+ *(above = \(s >= o \+ err\)|band = \(\(s > o - err\) &|band = \(\(s >= o - err\) & \(s < o \+ err\)\))",
        "equivalent in practice: the comparison changes only where a float32 score equals own -+ err exactly in"
        " float64; err = 2 (bound + own allowance) is a product of float32 norms with about 50 significant bits"
        " that no test input controls, and none of the tests' scores meets it",
    ),
    (
        r"x_delta_rule_capacity.*(horizon = 65|horizon \*= 5|horizon > 4096|horizon >= 4097)",
        "equivalent: the horizon's start and growth change how far the recursion runs before the crossing is found,"
        " not the crossing",
    ),
    (
        r"x_delta_rule_error.*\(dv is None\) and False",
        "equivalent: with dv None the branch broadcasts a NaN scalar, which does not change the shape of n, d and beta",
    ),
    (r"finite=None", "equivalent: _validate.tensor tests `finite` for truth, and None is false like False"),
    (
        r"x__float32_input_unit.*device\.type != \"(XXcudaXX|CUDA)\"",
        'equivalent: a CUDA device reaches that line only with the precision at "highest", where it returns 0 either way',
    ),
    (
        r"_correct__mutmut_\d+: \+ *unsure = torch\.zeros\(B, c, (dtype=None, )?device=r\.device\)",
        "equivalent: a float mask of 0 and 1 takes the same assignments, any() and nonzero() as the bool one",
    ),
    (
        r"x__half_normal_moments.*arange\(kmax \+ 1, (dtype=None)?\)",
        "equivalent: k holds 0, 1, 2 as integers or floats alike, and k / 2.0 and (x + 1.0) / 2.0 are floats either way",
    ),
    (
        r"x__half_normal_moments.*arange\(kmax \+ 2,",
        "equivalent: one moment more, which no DPFP product indexes (a coordinate enters with one sign at most twice)",
    ),
    (
        r"x__half_normal_moments.*2\.0 \*\* \(k (\* 2\.0|/ 3\.0) - 1\.0\)",
        "equivalent: a factor c^k on the k-th moment multiplies every term of the DPFP crosstalk and of its"
        " normalisation (both of degree 8 in the entries r) by c^8, so their ratio is unchanged",
    ),
    (
        r"x__psi_integral.*t = y (- 0\.5|\+ 1\.5)",
        "equivalent: t moves by a whole period, which adds the same constant (1/12) to the antiderivative at every y;"
        " the increment table uses differences of it only",
    ),
    (
        r"x_(decay|delta)_rounding_floor|x_rounding_variance.*sum\(None\)",
        "a test to add, added after the 2026-12-02 run: tests/test_theory_quadrature.py's floor test fails on it"
        " (checked by hand for the dropped stochastic= and the alpha != 1 choice); counted as survived until a rerun",
    ),
    # argmax.py, softmax.py, forgetting.py, features.py, additive.py, bill.py, decay.py, delta.py, heads.py
    # (survivors of the 2026-12-02 run; the others of these files are killed by tests/test_theory_mutants.py)
    (
        r"x_recall_at__mutmut_\d+: \+ *win = special\.ndtr\(\(1\.0 - sigma_c \* z\)",
        "equivalent: z is symmetric about 0 (a standard normal weight over the symmetric range [-12, 12]), so"
        " z -> -z gives the same integral",
    ),
    (
        r"x_recall_at__mutmut_\d+: \+ *inside = np\.where\(n - 1\.0 < kk, 2\.0,",
        "equivalent: where n - 1 < k the integrand becomes twice the normal density, whose integral 2 np.clip maps"
        " to 1, the value it had",
    ),
    (
        r"x_recall_at__mutmut_\d+: \+ *inside = .*np\.maximum\(n - kk, 1\.0\)",
        "equivalent: n - k < 1 only where n - 1 < k, where np.where takes 1.0 and drops the betainc branch",
    ),
    (
        r"x_recall_at__mutmut_\d+: \+ *value, _ = integrate\.quad_vec\(integrand, "
        r"(-1[23]\.0, 1[23]\.0, epsabs=1e-10, (epsrel=1e-8)?\)|-12\.0, 12\.0, epsrel=1e-8\))",
        "equivalent within the integrator's accuracy: the integrand is at most the normal density, below 1e-31 past"
        " |z| = 12, and scipy's defaults (epsabs 1e-200, epsrel 1e-8) are as tight or tighter",
    ),
    (
        r"x_recall_at_capacity_refined__mutmut_\d+: (\+ *start=None,|\+ *start=lambda a, b: argmax_capacity\(a, b, \),"
        r"|\+ *\) \| - *xtol=1e-7,| \| - *start=lambda a, b: argmax_capacity\(a, b, tau\),)",
        "equivalent within the solver's tolerance: the start of the bracket (and its step) and xtol change how the"
        " same root is bracketed and where brentq stops, within xtol = 1e-7 in ln n (recall decreases in n;"
        " _solve_capacity's default xtol, 1e-10, is tighter)",
    ),
    (
        r"x_recall_at_capacity_refined__mutmut_\d+: \+ *lambda n, a, b: _refined_one\(n, a, b, kk\) if "
        r"(\(n > kk\) or True|n >= kk|n > kk else 2\.0)",
        "equivalent: _refined_one returns 1.0 itself for n <= k (the guard saves work only); with 2.0 there f stays"
        " positive for n <= k and the root, above k + 1, is the same within brentq's xtol",
    ),
    (
        r"x_elu1_feature_error__mutmut_\d+: \+.*_crosstalk_over_d\((None|\"XXelu1XX\"|\"ELU1\"), d\)",
        "equivalent: _coordinatewise_crosstalk takes its ReLU branch for the name 'relu' and the elu + 1 branch for"
        " any other name",
    ),
    (
        r"x_polynomial_kernel_error__mutmut_\d+: \+ *second = np\.zeros_like\(None\)",
        "equivalent: n and d are broadcast to one shape, so a 0-d zero start gives the same array (n's shape)",
    ),
    (
        r"x_polynomial_kernel_error__mutmut_\d+: \+ *if (cp and cq or \(p \+ q\) % 2 == 0|cp or cq and \(p \+ q\) % 2"
        r" == 0|cp and cq and \(p - q\) % 2 == 0):",
        "equivalent: the terms the condition lets in have c_p c_q = 0 or an odd p + q, where sphere_moment is"
        " exactly 0, so they add zeros; p - q has the parity of p + q",
    ),
    (
        r"x__rule__mutmut_\d+: .*high_open=None\)|x_mamba2_step_moments__mutmut_\d+: .*low_open=None\)",
        "equivalent: _scalar tests high_open and low_open for truth, and None is false like False",
    ),
    (
        r"x_mamba2_step_moments__mutmut_\d+: \+ *vals, _ = integrate\.quad_vec\(moments, -1\.0, 1\.0, "
        r"(epsrel=1e-11, limit=400\)|epsabs=1e-14, epsrel=1e-11, \)|epsabs=1e-14, epsrel=1e-11, limit=401\))",
        "equivalent within 1e-15 relative: without epsabs scipy's default (1e-200) is tighter; 50 subintervals"
        " (the default limit) or 401 are as many as these smooth integrands use (moments unchanged to 1e-15 at"
        " d = 3..64, against scipy's quad)",
    ),
    (
        r"x__error_one__mutmut_\d+: \+ *if (n < 1|n >= 2):",
        "equivalent: at n = 1 (n = 2) the terms the branch adds carry the factor n - 1 (n - 2) = 0, and"
        " log_l >= log(2^-53) is finite, so they are exact zeros",
    ),
    (
        r"x__within__mutmut_\d+: \+ *return np\.ones_like\(None\)",
        "equivalent: a 0-d 1 instead of ones of p's shape; _refined_one's sums (p * wy).sum(-1) * wz then add the"
        " same numbers in the same order",
    ),
    (
        r"x__within__mutmut_\d+: \+ *return np\.exp\(\(n - 1\.0\) \* np\.log1p\(-np\.minimum\(p, (1\.0 \+|2\.0 -) 1e-16\)\)\)",
        "equivalent within rounding: p (a sum of probabilities times weights summing to 1) never exceeds 1 (largest"
        " 1.0 over d, dv = 2..32, n = 2.5..1e5); at p = 1 the read's term is (2^-53)^(n - 1) instead of 0",
    ),
    (
        r"x__refined_one__mutmut_\d+: \+ *if n < k:",
        "equivalent: at n = k, _within returns ones (n - 1 < k) and the quadrature weights sum to 1, so the general"
        " path gives 1.0 too (exactly, dv = 2..64)",
    ),
    (
        r"x__weight_one__mutmut_\d+: \+ *log_l = np\.log1p\(-np\.minimum\(one_minus_l, 1\.0 \+ 1e-(16|300)\)\)",
        "equivalent within rounding: 1 + 1e-16 rounds to 1.0, so where E e^(-tX) underflows (t > 36) log_l is"
        " -inf instead of log(2^-53); the weight's integrand e^(-t) L^(n - 1) (n > 1 there) loses less than"
        " e^-36 = 2e-16 in all",
    ),
]


def reason(key: str, diff: str) -> str:
    import re

    lines = [x.strip() for x in diff.splitlines() if x[:1] in "+-" and not x.startswith(("+++", "---"))]
    text = (
        key
        + ": "
        + " ".join(x for x in lines if x.startswith("+"))
        + " | "
        + " ".join(x for x in lines if x.startswith("-"))
    )
    for pattern, why in REASONS:
        if re.search(pattern, text):
            return why
    return "NOT CLASSIFIED: a test to add"


def load(directory: str) -> dict[str, tuple[str, str, str]]:
    """mutant name -> (status, source file, diff) for one run directory."""
    from mutmut import configuration

    configuration.reset_config()
    with _cwd(directory):
        from mutmut.__main__ import SourceFileMutationData, status_by_exit_code, walk_mutatable_files
        from mutmut.mutation.diff_apply import get_diff_for_mutant

        out = {}
        for path in walk_mutatable_files():
            m = SourceFileMutationData(path=path)
            m.load()
            for key, code in m.exit_code_by_key.items():
                status = status_by_exit_code[code]
                diff = get_diff_for_mutant(key, path=m.path) if status not in ("killed", "not checked") else ""
                out[key] = (status, str(path), diff)
    return out


def merge(runs: list[dict]) -> dict[str, tuple[str, str, str]]:
    rank = {"killed": 0, "timeout": 1, "survived": 2, "no tests": 3, "not checked": 4}
    merged: dict[str, tuple[str, str, str]] = {}
    for run in runs:
        for key, value in run.items():
            if key not in merged or rank.get(value[0], 5) < rank.get(merged[key][0], 5):
                merged[key] = value
    return merged


def main(argv: list[str]) -> int:
    merged = merge([load(d) for d in argv])
    per_file: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for status, path, _ in merged.values():
        per_file[path][status] += 1
    # a run stopped before its end leaves mutants "not checked": the score is of the mutants tested
    print("| file | mutants | tested | killed | survived | other | killed % of tested |")
    print("|---|---|---|---|---|---|---|")
    total = defaultdict(int)
    for path in sorted(per_file) + [None]:
        c = total if path is None else per_file[path]
        n, k, s = sum(c.values()), c["killed"], c["survived"]
        t = n - c["not checked"]
        if path is not None:
            for status, v in c.items():
                total[status] += v
        score = f"{100 * k / t:.1f}" if t else "-"
        print(f"| {path or 'all'} | {n} | {t} | {k} | {s} | {t - k - s} | {score} |")
    print()
    for key in sorted(merged):
        status, path, diff = merged[key]
        if status not in ("killed", "not checked"):
            lines = [x for x in diff.splitlines() if x[:1] in "+-" and not x.startswith(("+++", "---"))]
            print(f"- `{key}` ({status}): " + " / ".join(f"`{x.strip()}`" for x in lines) + f" -- {reason(key, diff)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
