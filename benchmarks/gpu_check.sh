#!/usr/bin/env bash
# One-shot GPU check of the kernels, for a session that has a CUDA machine (e.g. the H200 of the
# device tool): the compiled-kernel tests (pytest -m requires_cuda) and the kernel benchmark, with their
# logs and JSON under "$OUT". Bounded to about 7 minutes: tests 240 s, benchmark 180 s (it starts
# no new case after 150 s and writes its JSON after every case, so a cut run keeps its rows).
#
#   OUT=/some/folder bash benchmarks/gpu_check.sh        # device tool: $OUT is set for you
#
# Files written: env.txt (GPU, versions, install notes), gpu_tests.log, gpu_tests.xml,
# kernels.log, kernels.json. Exit status: 0 when the tests passed and the benchmark finished.
# flash-linear-attention is compared when importable: on a machine without network, carry its
# wheels (fla-core, flash-linear-attention) in .whl/ and they are installed to /tmp/site first.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
  $PY -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name())"
} >"$OUT/env.txt" 2>&1

if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >>"$OUT/env.txt" 2>&1 &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# make `lacapacity` (capacity/, with kernels/ as lacapacity.kernels) importable without network
if ! $PY -c "import lacapacity.kernels" 2>/dev/null; then
  mkdir -p plots studies  # package folders named in pyproject.toml; empty ones are not in git
  $PY -m pip install -q --no-deps --no-build-isolation -e . >>"$OUT/env.txt" 2>&1 || echo "pip install -e . failed" >>"$OUT/env.txt"
fi
if ! $PY -c "import lacapacity.kernels" 2>/dev/null; then  # last resort, in this copy of the tree only
  ln -sfn ../kernels capacity/kernels
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  echo "lacapacity.kernels reached through a symlink capacity/kernels -> ../kernels" >>"$OUT/env.txt"
fi

# pytest-xdist, where installed, compiles the ~150 kernel variants of the tests in parallel
parallel=()
if $PY -c "import xdist" 2>/dev/null; then parallel=(-n 8); fi
timeout 240 $PY -m pytest -m requires_cuda tests/kernels/test_kernels.py "${parallel[@]}" -v -rs -p no:cacheprovider --junitxml "$OUT/gpu_tests.xml" 2>&1 | tee "$OUT/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}

timeout 180 $PY benchmarks/kernels.py --budget-s 150 --out "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.log"
bench_rc=${PIPESTATUS[0]}

echo "gpu_check: tests exit $tests_rc, benchmark exit $bench_rc (124 = cut by its timeout)" | tee -a "$OUT/env.txt"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
