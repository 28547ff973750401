# Everything the project needs is installed by `make setup`: the Python packages of
# requirements.lock into .venv, and what the sandbox builds once per machine into the user cache
# (sandbox/build.py: the control plane's Go binaries, Dynamo's runtime venv). The Go builds, the
# longest part of a first setup, start as soon as nrl-k8s itself is installed (without its
# dependencies, which the build does not need) and run while uv installs the rest (make -j2).
# The interpreter the venv is made from: Debian's python3.11 where the machine has it with its venv
# module, else python3. The suite is CPU-bound and ~3/4 of its CPU is Python (the CLI, the sandbox,
# every Ray head's processes). Debian builds its interpreter with profile-guided and link-time
# optimisation and links libpython into it; this kind of machine puts a python3.11 first on PATH
# that was built without either (pyenv's default) and runs the same code ~15-20 % slower
# (bench/interpreter.py: pure Python, imports; a Ray head's start and one job, 20.8 -> 16.7 CPU-s).
# Looked up once (`?=` would look again at every use); PY=... on the command line or in the
# environment still wins.
ifndef PY
PY := $(shell /usr/bin/python3.11 -c 'import ensurepip, venv' 2>/dev/null && echo /usr/bin/python3.11 || echo python3)
endif
VENV := .venv
BIN := $(VENV)/bin
BOOT := $(VENV)/.nrl-k8s
STAMP := $(VENV)/.installed

.PHONY: setup sandbox-build lint test test-fast demo bench lock clean

# uv installs what pip would, from the same index and lock, in a quarter of pip's CPU on a fresh clone
# (it links the wheels from its cache and byte-compiles them on every core). Compiled up front, as
# pip did: where PYTHONDONTWRITEBYTECODE is set (CI sets it) Python never writes a module's bytecode,
# so every process would compile what it imports again (`import ray` 1.3 CPU-s instead of 0.5).
UV := $(BIN)/uv pip install -q --python $(BIN)/python

$(BOOT): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade 'pip==26.3' 'uv==0.13.9'
	$(UV) --no-deps -e .
	touch $(BOOT)

$(STAMP): $(BOOT) requirements.lock
	$(UV) --compile-bytecode -r requirements.lock
	touch $(STAMP)

sandbox-build: $(BOOT)
	$(BIN)/python -m nrl_k8s_sandbox.build $(BUILD_FLAGS)

# Kueue is built for the suite only (tests/integration/test_kueue.py): nothing else runs it, and it
# is a quarter of a first build's CPU, so a newcomer's first `make demo` does not wait for it.
test: BUILD_FLAGS := --kueue

# The project's own modules are compiled on every setup for the same reason (only what changed is
# compiled again): without it each CLI call compiled nrl_k8s afresh, ~0.1 CPU-s of its ~0.35.
setup:
	@$(MAKE) --no-print-directory -j2 $(STAMP) sandbox-build BUILD_FLAGS='$(BUILD_FLAGS)'
	@$(BIN)/python -m compileall -q src cli sandbox

# The checks that keep the code's shape (STYLE.md 11), settings in pyproject.toml: ruff, the
# import-linter layer contracts, mypy on nrl_k8s. make test runs them as a test of the suite
# (tests/test_lint.py), on one worker beside the others.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# One worker per CPU this run may use (sandbox/cpus.py: the CPUs it may run on, capped by its CPU
# quota, as in a container) and two more, four at most: the suite is mostly CPU-bound, its longest
# tests wait out deadlines, and each worker runs a sandbox of its own (README, Development: the
# one-CPU runs of each worker count).
WORKERS := $(shell $(PY) sandbox/cpus.py)
test: setup
	$(BIN)/pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# For the edit loop: lint, then the tests that need no sandbox.
test-fast: lint
	$(BIN)/pytest -q -n 2 tests/unit tests/cli tests/test_golden.py tests/test_packaging.py

demo: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

bench: setup
	$(BIN)/python bench/interpreter.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/sandbox_up.py
	$(BIN)/python bench/run_overhead.py
	$(BIN)/python bench/package.py
	$(BIN)/python bench/warm_rerun.py
	$(BIN)/python bench/log_follow.py
	$(BIN)/python bench/parallel_bringup.py
	$(BIN)/python bench/dynamo_serving.py
	$(BIN)/python bench/proxy_throughput.py
	$(BIN)/python bench/door_requests.py
	$(BIN)/python bench/bad_inputs.py
	$(BIN)/python bench/unreachable.py
	$(BIN)/python bench/venv_size.py

# Refresh requirements.lock: resolve pyproject.toml's ranges afresh in a throwaway venv, with
# every extra (make setup installs the sandbox and the tests too).
lock:
	rm -rf build/lock-venv
	$(PY) -m venv build/lock-venv
	build/lock-venv/bin/pip install -q --upgrade 'pip==26.3'
	build/lock-venv/bin/pip install -q '.[sandbox,test]'
	{ sed -n '1,2p' requirements.lock; build/lock-venv/bin/pip freeze --exclude-editable | grep -v '^nrl-k8s=='; } > requirements.lock.new
	mv requirements.lock.new requirements.lock
	rm -rf build/lock-venv

clean:
	rm -rf $(VENV) build *.egg-info
