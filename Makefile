# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)

.PHONY: setup run test stop server nightly lint bench clean

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
	@if [ -f .prefect/worker.pid ] && kill -0 $$(cat .prefect/worker.pid) 2>/dev/null; then \
		echo "worker already running"; \
	else \
		nohup prefect worker start --pool tracerl-local > .prefect/worker.log 2>&1 & \
		echo $$! > .prefect/worker.pid; echo "worker started (log: .prefect/worker.log)"; \
	fi
	@echo "nightly at 02:00 UTC; run it now: prefect deployment run nightly/nightly"

test: setup
	python -m pytest -q

lint: setup
	ruff check .

bench: setup
	python benchmarks/ingest.py

stop:
	@if [ -f .prefect/worker.pid ]; then kill $$(cat .prefect/worker.pid) 2>/dev/null || true; \
		rm -f .prefect/worker.pid; fi
	@if [ -x $(BIN)/python ]; then python -m tracerl server stop; fi

clean: stop
	rm -rf .prefect data/raw data/ingested data/labelled models reports/*/ dvc_plots
