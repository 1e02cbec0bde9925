# Fresh clone: `make up` runs the service, `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# `make install`: the virtual environment and buf (once; `up` and `test` do it themselves too).
.PHONY: bench-modules bench-volume seed-volume browser install up test lint typecheck gen gen-check pytest bench bench-tools clean

install: $(STAMP) node_modules/.installed

up: $(STAMP)
	$(BIN)/persona-service up

test: lint typecheck gen-check pytest

$(STAMP): pyproject.toml sdk/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]" -e ./sdk/python
	touch $(STAMP)

node_modules/.installed: package.json package-lock.json sdk/typescript/package.json
	npm ci --silent --no-audit --no-fund
	touch $@

lint: $(STAMP) node_modules/.installed
	bash scripts/lint_proto.sh
	$(BIN)/ruff check server tests scripts migrations sdk/python
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# gen/ from proto/, then the SDKs' generated layers from gen/openapi.json, then the CLI's command index.
SDK_GENERATORS := scripts/gen_sdk_python.py scripts/gen_sdk_typescript.py

gen: $(STAMP)
	$(BIN)/python scripts/gen_proto.py
	for g in $(SDK_GENERATORS); do $(BIN)/python $$g || exit 1; done
	$(BIN)/python scripts/gen_cli_index.py

gen-check: $(STAMP)
	$(BIN)/python scripts/gen_proto.py --check
	for g in $(SDK_GENERATORS); do $(BIN)/python $$g --check || exit 1; done
	$(BIN)/python scripts/gen_cli_index.py --check

pytest: $(STAMP) node_modules/.installed browser bench-tools
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Debian's Chromium for the dashboard's browser tests (Playwright drives it; it never downloads one).
browser:
	command -v chromium >/dev/null || \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium'

# Load generators (Debian's wrk and h2load) and the peer's and profiler's packages (the suite runs the benchmark briefly).
bench-tools: $(STAMP)
	command -v wrk >/dev/null && command -v h2load >/dev/null || \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nghttp2-client'
	$(BIN)/pip install --quiet -e ".[dev,bench]"

bench: bench-tools
	$(BIN)/python scripts/benchmark.py $(BENCH_ARGS)

# Portrait draw/edit times, signed-URL serving, invoice PDF render, invoice list latency.
bench-modules: bench-tools
	$(BIN)/python scripts/bench_modules.py $(BENCH_ARGS)

# Data volume (#32): seed .build/volume at the issue's sizes (SEED_ARGS="--scale 0.1" for a tenth), then
# every list, filter and lookup through Envoy, single client and 16 in flight; BENCH_ARGS reach the benchmark.
seed-volume: $(STAMP)
	$(BIN)/python scripts/seed_volume.py $(SEED_ARGS)

bench-volume: seed-volume
	$(BIN)/python scripts/bench_volume.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) node_modules .build
