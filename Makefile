# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)

# uv only resolves the lock (`make lock`); installs are plain pip from the hashed lock.
UV_VERSION := 0.13.9
LOCK_PLATFORM := --python-version 3.11 --python-platform x86_64-unknown-linux-gnu

.PHONY: setup lock run test stop server nightly lint bench plots clean chromium ui-check dist

# Every third-party package comes from requirements.lock (exact versions, sha256 hashes);
# the project itself is installed on top, without resolving anything again. --no-deps: the
# lock is complete, and pip check proves it; pip 23.2 (a fresh venv's) otherwise resolves a
# dependency's extra (prefect's httpx[http2]) to the index's newest release, not the pin.
$(VENV)/.installed: requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --no-deps --require-hashes -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	@$(BIN)/python -m pip check || { echo "requirements.lock does not satisfy pyproject.toml: run make lock"; exit 1; }
	touch $@

# Regenerate requirements.lock from pyproject.toml (runtime + dev extras), for CPython 3.11
# on linux x86_64, newest versions allowed by pyproject.toml. stdin adds the build backend:
# the project itself is installed without build isolation.
lock:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv==$(UV_VERSION)
	printf 'setuptools>=68\n' | $(BIN)/uv pip compile pyproject.toml - --extra dev \
		--generate-hashes --upgrade \
		$(LOCK_PLATFORM) --custom-compile-command "make lock" -o requirements.lock

# DVC's own `dvc plots show/diff` render offline: .dvc/config's plots.html_template names
# this page template, Vega inlined from the locked vl-convert (git-ignored, ~1 MB).
PLOTS_TEMPLATE := .dvc/tmp/plots/offline.html
$(PLOTS_TEMPLATE): $(VENV)/.installed tracerl/report/plots.py
	$(BIN)/python -m tracerl plots --template-only

# The project's own bytecode, compiled ahead (only what changed): a shell that sets
# PYTHONDONTWRITEBYTECODE (this machine's does) would otherwise compile every module again
# in every process, ~0.1 s of CPU each (an ingest's workers, every stage and test process).
setup: $(VENV)/.installed $(PLOTS_TEMPLATE)
	@$(BIN)/python -m compileall -q -j 0 tracerl flows tasks

server: setup
	python -m tracerl server start

# Every pipeline: the calculator fixture (dvc.yaml), the real tau2-bench logs
# (pipelines/tau2/dvc.yaml) and the support-desk fixture (pipelines/support_desk/dvc.yaml).
# A pipeline whose input logs are absent (tau2 without ../shared/realdata) is skipped with a
# warning that names them and where they come from (`tracerl inputs`), said again with its
# results; REQUIRE_INPUTS=1 fails instead (a machine that must have them, e.g. CI).
run: server
	python -m tracerl inputs $(if $(filter 1 yes true,$(REQUIRE_INPUTS)),--require)
	dvc repro $$(python -m tracerl inputs --runnable 2>/dev/null)
	python -m tracerl results
	python -m tracerl results --params pipelines/tau2/params.yaml
	python -m tracerl results --params pipelines/support_desk/params.yaml

# The nightly deployment (prefect.yaml): a process work pool and a worker that outlives
# this shell, so the schedule keeps firing; `make stop` stops both.
# `prefect` itself reads prefect.toml's address: it is given this checkout's server.
nightly: server
	export PREFECT_API_URL=$$(python -m tracerl server url) && \
	{ prefect work-pool inspect tracerl-local >/dev/null 2>&1 || \
		prefect work-pool create tracerl-local --type process; } && \
	prefect --no-prompt deploy --all
	python -m tracerl worker start --pool tracerl-local
	@echo "nightly at 02:00 UTC; run it now: prefect deployment run nightly/nightly"

# PYTEST_ARGS narrows a run, e.g. make test PYTEST_ARGS="-m integration".
test: setup chromium
	python -m pytest -q $(PYTEST_ARGS)

# Headless Chromium for the browser test and `make ui-check` (Debian's package, as root).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q chromium; }

# Screenshots of the latest ope run, its parameters, summary and plot: reports/ui/*.png
ui-check: setup chromium
	python -m flows._runtime.ui_check --out reports/ui

lint: setup
	ruff check .

# The package as a team installs it: dist/tracerl-VERSION.tar.gz (sdist) and
# dist/tracerl-VERSION-py3-none-any.whl, built by setuptools' own PEP 517 hooks from the
# locked setuptools (offline: no isolated build env). `pip install dist/tracerl-*.whl`, then
# `tracerl init NAME --logs ...` in any git repository (README: Install as a library).
dist: setup
	rm -rf dist build
	python -c "from setuptools import build_meta as b; b.build_sdist('dist'); b.build_wheel('dist')"
	@ls dist

# DVC plots as one HTML page that renders offline (Vega inlined): dvc_plots/index.html.
plots: setup
	python -m tracerl plots

bench: setup
	python benchmarks/ingest.py
	python benchmarks/train.py

# The worker for certain (SIGTERM to its process group, wait, then SIGKILL), then the server.
stop:
	@if [ -x $(BIN)/python ]; then python -m tracerl worker stop && python -m tracerl server stop; \
	elif [ -f .prefect/worker.pid ]; then echo "no $(BIN)/python: run make setup" >&2; exit 1; fi

clean: stop
	rm -rf .prefect data/raw data/ingested data/labelled data/tau2 models reports/*/ dvc_plots
