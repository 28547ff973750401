# Everything the project needs is installed by `make setup` into .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test demo bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(BIN)/pytest -q

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

bench: $(STAMP)
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/sandbox_up.py
	$(BIN)/python bench/run_overhead.py
	$(BIN)/python bench/package.py
	$(BIN)/python bench/warm_rerun.py
	$(BIN)/python bench/log_follow.py
	$(BIN)/python bench/parallel_bringup.py
	$(BIN)/python bench/bad_inputs.py

clean:
	rm -rf $(VENV) build *.egg-info
