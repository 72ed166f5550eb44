#!/usr/bin/env bash
# Static analysis of contracts/ with Slither. Exits non-zero on any finding (of any impact) that is not triaged.
#
# Needs python3.11 (or $PYTHON), node_modules (forge and solc-js) and PyPI; nothing else is downloaded:
# forge compiles offline through the project's solc-js wrapper (scripts/solc) and Slither reads forge's
# build-info, so neither it nor crytic-compile ever looks for a solc binary.
#
# Slither runs from its own virtual environment, .venv-slither (created here, idempotently): slither-analyzer
# pins versions of web3-adjacent packages that conflict with the node's .venv.
#
# Triage: a finding accepted on purpose carries `// slither-disable-next-line <detector> (why)` on the line
# before the flagged code. Only detectors whose reason holds for the whole codebase are excluded here:
#   timestamp  every phase of a job, a dispute and an unbonding has a deadline (docs/protocol.md §7), compared
#              with block.timestamp; the periods are minutes to days, far beyond what a block producer can skew.
#   assembly   inline assembly is the gas-critical core of the cycle path and of the shared protocol math
#              (SpecMath, CycleRecord, JobSlot's callers, the draw's hashing); every block is covered by the
#              shared vectors and the contract tests.
# Test harnesses (contracts/test) and OpenZeppelin (node_modules) are not analysed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV="$ROOT/.venv-slither"
SLITHER_VERSION=0.11.6
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

if ! "$VENV/bin/python" -c "import slither, sys; sys.exit(0)" >/dev/null 2>&1 \
    || [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("slither-analyzer"))' 2>/dev/null)" \
         != "$SLITHER_VERSION" ]; then
  echo "scripts/slither.sh: creating $VENV (slither-analyzer $SLITHER_VERSION)" >&2
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "slither-analyzer==$SLITHER_VERSION"
fi

# crytic-compile asks `forge config --json` about the project, so forge must be on PATH. A fresh, forced build in
# a folder of its own leaves exactly one build-info (an incremental build would leave stale ones beside it).
export PATH="$ROOT/node_modules/.bin:$PATH"
OUT=build/slither
rm -rf "$OUT"
mkdir -p "$OUT"
# (forge's own lint notes would drown the report: its output is shown only when the build fails)
if ! forge build --use "$ROOT/scripts/solc" --offline --force --build-info \
    --out "$OUT/out" --cache-path "$OUT/cache" >"$OUT/forge.log" 2>&1; then
  cat "$OUT/forge.log" >&2
  exit 1
fi

exec "$VENV/bin/slither" . \
  --compile-force-framework foundry --ignore-compile --foundry-out-directory "$OUT/out" \
  --filter-paths "node_modules|contracts/test" \
  --exclude timestamp,assembly \
  --fail-pedantic
