# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)

.PHONY: setup run test stop server lint bench clean

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

test: setup
	python -m pytest -q

lint: setup
	ruff check .

bench: setup
	python benchmarks/ingest.py

stop:
	@if [ -x $(BIN)/python ]; then python -m tracerl server stop; fi

clean: stop
	rm -rf .prefect data/raw data/ingested reports/ingest reports/validate
