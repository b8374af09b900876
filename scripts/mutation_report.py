"""Scores and surviving mutants of scripts/mutation.sh runs, as Markdown.

    .venv/bin/python scripts/mutation_report.py DIR [DIR ...]
    .venv/bin/python scripts/mutation_report.py 'OLD_RUN!x__binades__' NEW_RUN   # OLD_RUN's _binades left out

Each DIR is a target's run directory ($WORK/<target>). Several directories of the same target (a full run, then
runs of its survivors with more tests: ``MUTANTS=... scripts/mutation.sh``) are merged: a mutant counts as killed
if any run killed it, and as tested if any run tested it. ``DIR!REGEX`` takes from DIR only the mutants whose names
do not match REGEX: for a function changed after that run (its mutants' numbers then name other mutations), whose
mutants a later run tested. Prints the score per file and, for every mutant not killed, its status and diff.
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
        r"x_(argmax|topk)_correct__mutmut_\d+: \+[^|]*(device=None\)|arange\(c, \)|numel\(\), \)|tensor\(ks, \)|dtype=torch\.bool, \)"
        r"|full\(\(stop - start,\), -math\.inf, \))",
        "needs a CUDA device: made without r's device, the tensor is still on r's device on the CPU (the same program);"
        " on CUDA it would be made on the CPU, which only tests/tasks/test_decode.py::test_cuda_screens_match_the_exact_decode"
        " (skipped without a GPU) can see",
    ),
    (
        r"must be on one device",
        "needs two devices: without a GPU every tensor that holds numbers is on 'cpu' (_validate.tensor refuses meta"
        " tensors before this check)",
    ),
    # capacity/theory/precision.py and capacity/theory/_common.py (tests/theory/test_theory_precision_mutants.py kills the rest)
    (
        r"x_(rounding_crossover|_stall_stats|stall_onset)__mutmut_\d+: \+[^|]*_trajectory\(\"linear\", [^|]*, dtype, "
        r"(None, 1\.0|2\.0, 1\.0|1\.0, None|1\.0, 2\.0), ",
        "equivalent: the linear memory never reads alpha or beta (_check_memory takes alpha = 1 and beta = 0 for it"
        " without reading them, and _trajectory scales the increments only for the delta rules)",
    ),
    (
        r"x_(_stall_stats|stall_onset)__mutmut_\d+: \+[^|]*_trajectory\(\"linear\", [^|]*, dtype, 1\.0, 1\.0, None\)"
        r"|x__stall_at__mutmut_\d+: \+[^|]*_increment_table\(d, dv, None\)",
        "equivalent: None is false like False, and the trajectory and the increment table only test the flag's truth"
        " (_step_stats builds the table for bool(stochastic))",
    ),
    (
        r"x_stall_onset__mutmut_\d+: \+[^|]*(math\.log\(101\.0 / u\*\*2\)|math\.log\(100\.0 / u\*\*3\)"
        r"|int\(math\.exp\(hi\)\) (- 1|\+ 2), )",
        "no independent test can see it: the onset (0.5/u^2 ... 1.2/u^2) stays inside the bracket, whose top also sets"
        " the trajectory's length, which moves the trajectory's geometric grid (ratio 1.005) past 512 writes; the"
        " onset moves by 4e-7 relative at most (measured for bfloat16, float16, float8_e4m3fn at fractions 0.1 and"
        " 0.5), as it does for any other length",
    ),
    (
        r"x_stall_onset__mutmut_\d+: \+[^|]*(range\(61\)|\)\[0\] <= f:)",
        "equivalent within the bisection's resolution: after 60 halvings the bracket in log n is 2^-60 of log(50/u^2)"
        " wide (< 4e-17); a 61st halving, or a tie (stall fraction = fraction exactly at a midpoint) sent the other"
        " way, moves the onset by that much (measured: 0 and 4e-15 relative)",
    ),
    (
        r"x_rounding_crossover__mutmut_\d+: \+def rounding_crossover\([^|]*n_max: float = 1000000001\.0\)",
        "no independent test can see it: one write more in n_max's default moves the trajectory's geometric grid"
        " points (rounded to whole writes) by one write at most (measured: the crossover unchanged, bfloat16 and"
        " float8_e4m3fn at d = dv = 8); only a crossing in (1e9, 1e9 + 1] would become finite",
    ),
    (
        r"x_rounding_crossover__mutmut_\d+: \+ *rel = vv \* V \* dd / np\.maximum\(s - 1\.0, 1\.0\)",
        "equivalent: s - 1 < 1 only at s = 1, whose ratio is never read (the crossing is searched where s > 1, and the"
        " interpolation starts at s[i - 1] > 1)",
    ),
    (
        r"x_rounding_crossover__mutmut_\d+: \+ *if i == 1 or s\[i - 1\] <= 1:",
        "equivalent: the grid starts at s = 1 and increases, and i >= 1 (s > 1 excludes i = 0), so s[i - 1] <= 1"
        " exactly when i == 1",
    ),
    (
        r"x_rounding_crossover__mutmut_\d+: \+[^|]*if \(y1 != y0\) or True else s\[i\]",
        "equivalent: y1 = log rel[i] >= 0 > y0 = log rel[i - 1] (i is the first point past s = 1 with rel >= 1, and"
        " s[i - 1] > 1 on that branch), so y1 != y0 always",
    ),
    (
        r"x__interp__mutmut_\d+: \+[^|]*np\.clip\(rho, (None, np\.exp\(log_rho\[-1\]\)|np\.exp\(log_rho\[0\]\), None)\)",
        "equivalent: np.interp already holds the end values outside the table's range, and rho > 0 (ulps and"
        " increment scales are positive), so clipping at either end changes nothing",
    ),
    (
        r"x__interp__mutmut_\d+: \+[^|]*np\.clip\(rho, np\.exp\(log_rho\[0\]\), np\.exp\(log_rho\[-2\]\)\)",
        "a test to add (needs over 6e7 writes): only ulps beyond 0.985e4 times the increments' rms read the table's"
        " last cell; for round-to-nearest its two ends are equal (every write lost, to 5e-15), for stochastic"
        " rounding the binades past the table's top are clamped in both versions; a state's ulps get there only"
        " after u^2 n > 1e6 writes of the linear memory (6e7 in float8_e5m2; the tests' simulations write 2e4)",
    ),
    (
        r"x__grid__mutmut_\d+: \+ *exact = np\.arange\(1, min\(n_max, 512\) \+ 1, (dtype=None)?\)",
        "equivalent: the step counts are whole numbers, exact as integers or as floats, and every use converts them"
        " (np.asarray(float64) in _moment, arithmetic with floats, np.interp)",
    ),
    (
        r"x__grid__mutmut_\d+: \+ *exact = np\.arange\(min\(n_max, 512\) \+ 1, dtype=np\.float64\)",
        "equivalent: the grid gains s = 0, a zero state where nothing is accumulated (a gap of 0 steps), and whose"
        " zero spread makes the fixed point's convergence test NaN, so that all 12 passes run: the values it"
        " converges to are the same (measured: T15, the crossovers, the stall fraction and the floors unchanged)",
    ),
    (
        r"x__grid__mutmut_\d+: \+ *if n_max (< 512|<= 513):",
        "equivalent: at n_max = 512 the geometric part is [512, 512], at 513 it is [512, 513], so the grid is"
        " 1 ... n_max either way",
    ),
    (
        r"x__grid__mutmut_\d+: \+ *(exact = np\.arange\(1, min\(n_max, 51[23]\) \+ [12], dtype=np\.float64\)"
        r"|geo = np\.round\(np\.geomspace\(51[23], n_max, int\(math\.log\(n_max / 51[23]\) / math\.log\(1\.005\)\) [-+] [23]\)\))"
        r"|x__accumulate__mutmut_\d+: \+ *wbar = w\[i\] if prev_w is None or g <= 2 else",
        "no independent test can see it: it moves, adds or drops a grid point of the trajectory past 512 writes (or"
        " takes a gap of 2 writes at its end instead of its mean), which changes T15, the crossovers, the stall"
        " fraction and the floors by 3e-5 at most (measured, n = 300 ... 1e5), below the grid's own discretisation"
        " error (3e-4 against every step summed at n = 3000, tests/theory/test_theory_precision_mutants.py)",
    ),
    (
        r"x__grid__mutmut_\d+: \+ *geo = np\.round\(np\.geomspace\(512, n_max, int\(math\.log\(n_max \* 512\)",
        "no independent test can see it: the grid past 512 writes gets about 8 times as many points, which moves"
        " T15 towards its every-step sum (by 2.4e-4 at n = 3000, where the original is 3.2e-4 from it, within the"
        " test's 1e-3) and the stall fraction at n = 20000 by 3e-3: the original's own discretisation error, which"
        " a test can only bound",
    ),
    (
        r"x__trajectory__mutmut_\d+: \+ *(for _ in range\(13\):|done = None|done = np\.max\(np\.abs\(new \+ spreads\) / spreads\) < 1e-6"
        r"|done = np\.max\(np\.abs\(new - spreads\) / spreads\) <= 1e-6)",
        "no independent test can see it: it runs the fixed point for more passes (all 12, or 13) after the stored"
        " spread has converged to 1e-6, or stops on a tie at 1e-6 exactly; the passes past that point move T15 by"
        " 2.2e-7 relative at most (measured, n = 100 ... 1e5; the tests of the trajectory allow 1e-6 up to 512 writes)",
    ),
    (
        r"x__binades__mutmut_\d+: \+ *sigma = np\.asarray\(sigma, (dtype=None)?\)",
        "equivalent: every caller passes float64 already (rounding_variance its checked numbers, _step_stats square"
        " roots of float64 spreads, _stall_at np.atleast_1d of a float)",
    ),
    (
        r"x__binades__mutmut_\d+: \+ *lo = max\(emin, int\(math\.floor\(math\.log2\(max\(float\(sigma\.min\(\)\), 1e-300\)\)\)\) - 41\)",
        "equivalent to 1.5e-12: one more binade at the bottom splits the first bin, which holds |x| < 2^-39 sigma (a"
        " mass below 1.5e-12, with ulps 2^-40 of the main binade's), so every result moves by less than that mass",
    ),
    (
        r"x__binades__mutmut_\d+: \+ *hi = max\(lo \+ 2, ",
        "equivalent: it adds a second binade only where sigma < 2^(lo - 6), and the mass it would hold, |x| >="
        " 2^(lo + 1) > 128 sigma, is 0 in double precision (erf(90) = 1)",
    ),
    (
        r"x__binades__mutmut_\d+: \+ *(hi = max\(lo \+ 1, int\(math\.ceil\(math\.log2\(max\(float\(sigma\.max\(\)\), "
        r"(1\.0\)\)\)\) \+ 8|1e-300\)\)\)\) \+ 9)\)|P\[\.\.\., -1\] -= 1\.0 - cdf\[\.\.\., -1\])",
        "equivalent: the binades it adds at the top, or the mass above the top edge it subtracts instead of adding,"
        " lie 256 sigma or more above the largest sigma, where the Gaussian's mass is 0 in double precision"
        " (1 - erf(181) = 0)",
    ),
    (
        r"x__binades__mutmut_\d+: \+ *(edges = 2\.0 \*\* np\.arange\(lo \+ 1, hi \+ 1, (dtype=None)?\)"
        r"|q = 2\.0 \*\* \(np\.arange\(lo, hi, (dtype=None)?\))",
        "equivalent: the exponents are whole numbers, and 2.0 ** (an integer array) is the same float64 array",
    ),
    (
        r"x__binades__mutmut_\d+: \+ *P = np\.diff\(np\.concatenate\(\[np\.zeros_like\(cdf\[\.\.\., :1\]\), cdf, "
        r"np\.ones_like\(cdf\[\.\.\., :1\]\)\], axis=[-+]1\), (axis=[-+]1)?\)",
        "equivalent: cdf is [S, E] (every caller passes a 1-d sigma), so axis 1 is axis -1, np.diff's default",
    ),
    (
        r"x__check_memory__mutmut_\d+: \+ *b = float\(beta\) if (\(memory in \(\"delta\", \"gated_delta\"\)\) or True else 0\.0"
        r"|memory in \(\"delta\", \"gated_delta\"\) else 1\.0)"
        r"|x__contraction__mutmut_\d+: \+[^|]*if \(memory in \(\"delta\", \"gated_delta\"\)\) or True else a \* a",
        "equivalent: beta is read only by the delta rules (their contraction, write energy and increment scale), and"
        " with b = 0 for the other memories the delta rules' contraction a^2 (1 - (2b - b^2)/d) is their a^2",
    ),
    (
        r"x__moment__mutmut_\d+: \+ *s = np\.asarray\(s, (dtype=None)?\)",
        "equivalent: every caller passes float64 already (the trajectory's grid, or n checked by _counts)",
    ),
    (
        r"x__step_stats__mutmut_\d+: \+ *small = rho <= np\.exp\(log_rho\[0\]\)",
        "equivalent but for a tie: it differs only where an ulp over the increment scale equals the table's first"
        " spacing exactly, and there by 1.6e-4 of that binade's variance (the table's first cell holds the uniform"
        " error rho^2/12, rho^2/6 stochastic, to 1.6e-4)",
    ),
    (
        r"x__step_stats__mutmut_\d+: \+ *small = rho < np\.exp\(log_rho\[1\]\)",
        "no independent test can see it: spacings in the table's first cell (1.5% wide, at 1e-4 of the increments'"
        " rms) get the uniform error q^2/12 (q^2/6) instead of the table, which holds that value there to 1.6e-4"
        " (measured: T15 unchanged for float32, bfloat16, float8, float16 states; the test of the uniform error"
        " allows 1e-3)",
    ),
    (
        r"x__step_stats__mutmut_\d+: \+ *k = np\.where\(None, z2, ",
        "no independent test can see it: for spacings below the table (increments over 1e4 ulps) the kept part is"
        " taken from the table's first cell instead of E z^2, which adds -rho_0^2/12 (1e-8 of an increment's"
        " variance) to the error's covariance; that enters only the stored spread, and T15 moves by 1e-10"
        " relative at most (measured: bfloat16 linear and delta rule, float32, float16)",
    ),
    (
        r"x_delta_rounding_floor.*mem = \"delta\" if (\(float\(alpha\) == 1\.0\) and False|float\(alpha\) == 2\.0) else",
        "equivalent: the gated delta rule at alpha = 1 is the delta rule (both take alpha = 1 in every function of the"
        " model), so choosing it always gives the same floor",
    ),
    (
        r"x_(decay|delta)_rounding_floor.*n = np\.ceil\(4[01]\.0 / \(1\.0 - (a \* a|c)\)\) [+-] [12]\b",
        "equivalent: the floor is the step-rounding error at an n with c^n <= e^-40; one step or 2.5% more or fewer"
        " moves it by a relative e^-39 (tests/theory/test_theory_quadrature.py holds it to the limit to 1e-9)",
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
        " 2e-5 agreement with a finer quadrature (tests/theory/test_theory_exact.py)",
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
        " no test read does (tests/tasks/test_decode.py::test_the_screen_decides_exactly_the_reads_outside_twice_the_"
        "derived_bound places margins at 0.75 and 1.25 times it)",
    ),
    (
        r"x_argmax_correct__mutmut_\d+: \+ *(whole = (None|alive\.numel\(\) == stop \+ start)|"
        r"s = _screen_matmul\(rs\[b, start:stop\] if \(whole\) and False)",
        "equivalent: `whole` only picks the cheaper of two spellings of the same scores (the block's rows as a slice"
        " with the own scores on a diagonal, or the same rows gathered by index with the own scores left out one by"
        " one); a mutant that takes the general spelling where the slice would do, or gathers the rows of a whole"
        " block, gives the same numbers in the same order",
    ),
    (
        r"x_argmax_correct__mutmut_\d+: \+ *if j1 <= c:",
        "equivalent: after the last part the reads surely beaten are set aside once more before the final"
        " classification, which would find them wrong too (neither right nor undecided): the same answer and the"
        " same scores computed",
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
    # argmax.py, softmax.py, forgetting.py, features.py, additive.py, bill.py, decay.py, delta.py, heads.py
    # (survivors of the 2026-12-02 run; the others of these files are killed by tests/theory/test_theory_mutants.py)
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


def _load(arg: str) -> dict[str, tuple[str, str, str]]:
    """A run directory's mutants, those matching the regular expression after a "!" left out."""
    import re

    directory, _, skip = arg.partition("!")
    run = load(directory)
    return {k: v for k, v in run.items() if not (skip and re.search(skip, k))}


def main(argv: list[str]) -> int:
    merged = merge([_load(d) for d in argv])
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
