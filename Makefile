# The two set-up commands in the README: `make demo` (install, then the main job on a real model, this machine as
# the device) and `make test` (install system + test dependencies, then the whole suite).
PY ?= python3
VENV ?= .venv
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: demo test venv test-venv clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

venv: $(BIN)/python
	scripts/install-system-deps.sh demo
	$(BIN)/python -m pip install -q -e .

test-venv: $(BIN)/python
	scripts/install-system-deps.sh test
	$(BIN)/python -m pip install -q -e '.[test]'

demo: venv
	scripts/demo.sh

# One pytest worker per CPU; whole files per worker, so module-scoped builds are made once.
PYTEST_WORKERS ?= auto
test: test-venv
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=40 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) demo-out build *.egg-info
