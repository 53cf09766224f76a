PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-fast lint demo bench clean

install: $(STAMP)

# torch is pinned first so pip takes the CPU build instead of the CUDA one.
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0" || $(BIN)/pip install -q torch --index-url https://download.pytorch.org/whl/cpu
	$(BIN)/pip install -q -e ".[dev,bench]"
	touch $(STAMP)

test: install
	$(BIN)/pytest -q

test-fast: install
	$(BIN)/pytest -q -m "not slow"

lint: install
	$(BIN)/ruff check ctxkit tests scripts
	$(BIN)/mypy ctxkit

demo: install
	$(BIN)/ctxkit count sample_transcripts/tau-bench-airline.json
	$(BIN)/ctxkit guard sample_transcripts/tau-bench-airline.json --model gpt-4 ; true
	$(BIN)/ctxkit compact sample_transcripts/tau-bench-airline.json --limit 3000 --archive /tmp/ctxkit-demo.ctx.db -o /tmp/ctxkit-demo.json --explain
	$(BIN)/ctxkit recall --list --archive /tmp/ctxkit-demo.ctx.db

bench: install
	$(BIN)/ctxkit bench --suite all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
