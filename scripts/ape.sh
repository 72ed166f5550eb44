#!/usr/bin/env bash
# ape (eth-ape + ape-solidity + ape-foundry) over the project's contracts, offline apart from PyPI/npm.
#
#   bash scripts/ape.sh compile [ape compile args]   # ape compile (output in .build/)
#   bash scripts/ape.sh test [pytest args]           # ape test tests_ape (default: -q --tb=short); anvil on a free port
#   bash scripts/ape.sh ape ARGS...                  # any other ape command in the same set-up
#
# Idempotent set-up, every run:
# - .venv-ape: ape's own venv (its pins clash with the node's .venv: click<8.2, web3<8), installed from
#   scripts/ape-requirements.txt; a stamp holding that file's hash skips the install when nothing changed.
# - ~/.solcx/solc-v0.8.28 -> this checkout's scripts/solc (the solc-js wrapper), where py-solc-x (and so
#   ape-solidity) looks, so ape never tries to download solc. A real native solc already there is kept.
# - node_modules/.bin on PATH: ape-foundry starts `anvil` from there (npm @foundry-rs/anvil-linux-amd64).
# node_modules must exist (`make setup`, or `npm ci`): it also holds @openzeppelin/contracts and solc-js.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PYTHON=${PYTHON:-python3}
VENV=.venv-ape
REQS=scripts/ape-requirements.txt
STAMP=$VENV/.installed
SOLC_VERSION=0.8.28

die() { echo "scripts/ape.sh: $*" >&2; exit 1; }

for need in node_modules/solc node_modules/.bin/anvil node_modules/@openzeppelin/contracts/package.json; do
    [[ -e $need ]] || die "$need is missing: run \`make setup\` (or \`npm ci\`) first"
done

want=$(sha256sum "$REQS" | cut -d' ' -f1)
if [[ ! -x $VENV/bin/ape || ! -f $STAMP || $(cat "$STAMP") != "$want" ]]; then
    echo "scripts/ape.sh: installing ape into $VENV (pinned by $REQS)" >&2
    [[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -r "$REQS"
    "$VENV/bin/python" -m pip check
    echo "$want" > "$STAMP"
fi

# solc for py-solc-x: a symlink to this checkout's wrapper (re-pointed when it names another checkout or
# dangles); a regular file is a native solc 0.8.28 someone installed, as good as the wrapper.
solcx_dir=${SOLCX_BINARY_PATH:-$HOME/.solcx}
solc_link=$solcx_dir/solc-v$SOLC_VERSION
mkdir -p "$solcx_dir"
if [[ -L $solc_link || ! -e $solc_link ]]; then
    [[ $(readlink "$solc_link" 2>/dev/null) == "$ROOT/scripts/solc" ]] || ln -sfn "$ROOT/scripts/solc" "$solc_link"
fi
"$solc_link" --version | grep -q "Version: $SOLC_VERSION+" || die "$solc_link is not solc $SOLC_VERSION"

export PATH="$ROOT/node_modules/.bin:$ROOT/$VENV/bin:$PATH"

free_port() {
    "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
    compile)
        exec ape compile "$@" ;;
    test)
        # ape-foundry starts its own anvil on this port (never 8545, never a node someone else runs:
        # tests_ape/conftest.py fails if ape did not start the node itself).
        APE_FOUNDRY_HOST="http://127.0.0.1:$(free_port)"
        export APE_FOUNDRY_HOST
        [[ $# -gt 0 ]] || set -- -q --tb=short
        exec ape test tests_ape "$@" ;;
    ape)
        exec ape "$@" ;;
    *)
        die "usage: bash scripts/ape.sh compile|test|ape [ARGS...]" ;;
esac
