# The two commands of README.md: `make run` starts the service, `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: `make run` installs the service and its client only (STAMP); `make test` adds
# the developer tools of the `dev` extra (DEV_STAMP), which a user starting the service
# never needs (they are most of the download and of .venv's size). --no-compile: pip would
# byte-compile every module of every package (half the install time on 2 cores); Python
# compiles the few hundred the service imports on the first start instead, and keeps them.
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: test lint typecheck pytest test-deps run clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(DEV_STAMP)

test: $(DEV_STAMP) lint typecheck pytest

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint Dockerfile

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

# In parallel (pytest-xdist): PYTEST_WORKERS processes, one per core and one more (the
# workers wait on the servers, PostgreSQL and browsers they start: with one per core ~30%
# of the cores sat idle; on 2 cores 3 workers took the suite from 15:28 to 12:14), each
# test file whole on one worker (--dist loadfile), so a module's trained models and live
# servers are built once. Every server a test starts takes a free port and its own
# temporary folder.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print((os.cpu_count() or 1) + 1)")
pytest: $(DEV_STAMP) test-deps
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile

# System programs the tests run for real (PostgreSQL's server, ...), installed from Debian
# when missing and we are root: see scripts/test_deps.sh.
test-deps:
	bash scripts/test_deps.sh

# Serve on $HOST:$PORT (default 127.0.0.1:8000) with ENSEMBLE_WORKERS server processes
# (default 1); settings are ENSEMBLE_* variables. `python -m app` is the Docker image's CMD.
run: $(STAMP)
	$(BIN)/python -m app

clean:
	rm -rf $(VENV) .venv-kserve .venv-kserve.lock .mypy_cache .pytest_cache .ruff_cache

# Builds and runs the Docker image with podman, no Docker engine needed (root, a few
# minutes; not part of `make test`): see scripts/docker_smoke.sh.
.PHONY: docker-smoke
docker-smoke:
	bash scripts/docker_smoke.sh

# The performance suite (a few minutes, loopback only; not part of `make test`): starts the
# service, trains the reference models through the API, loads it with wrk and prints each
# figure next to the in-process scikit-learn floor. BENCH_ARGS="--quick" for a smoke run.
# The LightGBM and XGBoost rows need the boosting extra, explain_bench shap (the explain
# extra); no developer tools.
.PHONY: bench
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[boosting,explain]"
	$(BIN)/python benchmarks/service_bench.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/explain_bench.py
