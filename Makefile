# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)

.PHONY: setup run test stop server nightly lint bench clean chromium ui-check

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

server: setup
	python -m tracerl server start

run: server
	dvc repro
	python -m tracerl results

# The nightly deployment (prefect.yaml): a process work pool and a worker that outlives
# this shell, so the schedule keeps firing; `make stop` stops both.
nightly: server
	prefect work-pool inspect tracerl-local >/dev/null 2>&1 || \
		prefect work-pool create tracerl-local --type process
	prefect --no-prompt deploy --all
	python -m tracerl worker start --pool tracerl-local
	@echo "nightly at 02:00 UTC; run it now: prefect deployment run nightly/nightly"

test: setup chromium
	python -m pytest -q

# Headless Chromium for the browser test and `make ui-check` (Debian's package, as root).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q chromium; }

# Screenshots of the latest ope run, its parameters, summary and plot: reports/ui/*.png
ui-check: setup chromium
	python -m flows.ui_check --out reports/ui

lint: setup
	ruff check .

bench: setup
	python benchmarks/ingest.py

# The worker for certain (SIGTERM to its process group, wait, then SIGKILL), then the server.
stop:
	@if [ -x $(BIN)/python ]; then python -m tracerl worker stop && python -m tracerl server stop; \
	elif [ -f .prefect/worker.pid ]; then echo "no $(BIN)/python: run make setup" >&2; exit 1; fi

clean: stop
	rm -rf .prefect data/raw data/ingested data/labelled models reports/*/ dvc_plots
