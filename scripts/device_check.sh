#!/usr/bin/env bash
# The one prepared check for a lent CUDA GPU (issue 3): the CUDA tests, the precision gap and the decode
# benchmark on cuda at temperature 1 and 0. Everything it makes lands under $OUT (7 files).
#
# The device image has torch and transformers but nothing can be fetched there, and it lacks two small
# packages the protocol math needs. Here, once:
#     bash scripts/device_check.sh --fetch-wheels          # eth-hash + safe-pysha3 for Python 3.12 into .whl/
# then one device call, about 5 minutes with the machine's start:
#     run(command="bash scripts/device_check.sh", carry=[".whl"], timeout_s=540)
# Then put $OUT/bench_cuda_t1.txt and bench_cuda_t0.txt beside the CPU tables in docs/benchmarks.md.
#
# Locally (no GPU), the same flow on CPU checks the script itself:
#     OUT=/tmp/out PY=.venv/bin/python DEVICE=cpu GAMMAS=1,2 bash scripts/device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
GAMMAS=${GAMMAS:-1-8}

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    exec python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl eth-hash==0.8.0 safe-pysha3==1.0.7
fi
: "${OUT:?set OUT to the folder whose files come back}"

if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "installing the carried wheels failed" >&2; exit 1; }
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error

{
    nvidia-smi 2>&1 || echo "no nvidia-smi"
    "$PY" -c "import sys, torch, transformers, numpy; print(sys.version); print('torch', torch.__version__, \
'transformers', transformers.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
} >"$OUT/device.txt" 2>&1

# the tiny pair unless told otherwise: the scripts' default is the real pair, whose converted target is git-ignored
# (made by `make setup`, 538 MB) and so not on a device machine that gets only the working tree
export VERISPEC_PAIR=${VERISPEC_PAIR:-tiny}
status=0
step() {  # name, seconds, command...: run one part, keep going after a failure, remember it
    local name=$1 limit=$2
    shift 2
    echo "== $name"
    timeout "$limit" "$@" || { echo "!! $name failed ($?)"; status=1; }
}
step tests 200 bash -c "$PY -m pytest --noconftest -q -rA tests/test_cuda.py tests/test_sampler.py >'$OUT/tests.txt' 2>&1"
tail -3 "$OUT/tests.txt"
step precision 90 bash -c "$PY scripts/precision_gap.py >'$OUT/precision_gap.txt' 2>&1"
cat "$OUT/precision_gap.txt"
for t in 1 0; do
    step "bench T=$t" 150 bash -c "$PY scripts/bench_decode.py --device $DEVICE --gammas $GAMMAS --temperature $t \
--json-out '$OUT/bench_cuda_t$t.json' >'$OUT/bench_cuda_t$t.txt' 2>&1"
    cat "$OUT/bench_cuda_t$t.txt"
done
exit $status
