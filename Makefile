PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-fast test-agents test-light lint demo bench clean

install: $(STAMP)

# torch is pinned first so pip takes the CPU build instead of the CUDA one.
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.13.0" || $(BIN)/pip install -q torch --index-url https://download.pytorch.org/whl/cpu
	$(BIN)/pip install -q -e ".[minilm,parquet,hf,mcp,ray,dev,bench]"
	touch $(STAMP)

# Two workers (the machine's two cores); bytecode is cached outside the checkout even where the
# environment says PYTHONDONTWRITEBYTECODE (pytest would otherwise rewrite every test file's
# asserts on every run).
PYTEST := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$${TMPDIR:-/tmp}/ctxkit-pycache \
	$(BIN)/pytest -q -n 2 --dist worksteal

# The tests that run the real agents are left to `make test-agents`.
test: install
	$(PYTEST) -m "not agents"

test-fast: install
	$(PYTEST) -m "not slow and not agents"

# The real agents: the pinned npm packages (ctxkit/agents/drivers.py) installed into the agents
# cache outside the checkout, then the tests marked `agents`. Without node or npm nothing is
# installed and those tests skip, saying why.
AGENTS_DIR ?= $(or $(CTXKIT_AGENTS_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ctxkit/agents)

test-agents: install
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		CTXKIT_AGENTS_DIR="$(AGENTS_DIR)" $(BIN)/ctxkit agent install; \
	else echo "node or npm not found: the agents are not installed and their tests will skip"; fi
	CTXKIT_AGENTS_DIR="$(AGENTS_DIR)" $(PYTEST) -m agents

# The light install (`pip install .`, no extras) in its own virtualenv: no torch, under 300 MB,
# and count, guard and the default compact work in it. CI runs it after `make test`.
LIGHT := build/light-venv
LIGHT_MAX_MB := 300

test-light:
	rm -rf $(LIGHT) build/light-demo && mkdir -p build/light-demo
	$(PY) -m venv $(LIGHT)
	$(LIGHT)/bin/pip install -q --upgrade pip
	$(LIGHT)/bin/pip install -q .
	@if $(LIGHT)/bin/pip list 2>/dev/null | grep -i -E "^(torch|sentence-transformers|transformers|nvidia-)"; then \
		echo "light install pulled in a model stack"; exit 1; fi
	env -u PYTHONPATH $(LIGHT)/bin/ctxkit count $(SAMPLE) --by role --format table
	env -u PYTHONPATH $(LIGHT)/bin/ctxkit guard $(SAMPLE) --model gpt-4-turbo
	env -u PYTHONPATH $(LIGHT)/bin/ctxkit compact $(SAMPLE) --limit 4000 -o build/light-demo/small.json
	env -u PYTHONPATH $(LIGHT)/bin/ctxkit guard build/light-demo/small.json --limit 4000
	@size=$$(du -sm $(LIGHT) | cut -f1); echo "light install: $$size MB (limit $(LIGHT_MAX_MB) MB)"; \
		test $$size -lt $(LIGHT_MAX_MB)

lint: install
	$(BIN)/ruff check ctxkit tests scripts
	$(BIN)/mypy ctxkit

DEMO := build/demo
SAMPLE := sample_transcripts/tau-bench-airline.json

# The main job on a bundled real transcript: count it, guard it, compact it, check and undo.
demo: install
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(BIN)/ctxkit count $(SAMPLE) --by role --format table
	$(BIN)/ctxkit guard $(SAMPLE) --model gpt-4 --model gpt-4-turbo
	@# over the limit on purpose: guard exits 5, which the demo expects (compact comes next)
	$(BIN)/ctxkit guard $(SAMPLE) --limit 4000 || test $$? -eq 5
	$(BIN)/ctxkit compact $(SAMPLE) --limit 4000 -o $(DEMO)/small.json --report $(DEMO)/report.json --explain
	$(BIN)/ctxkit guard $(DEMO)/small.json --limit 4000
	$(BIN)/ctxkit recall --list --archive $(DEMO)/small.json.ctx.db
	$(BIN)/ctxkit expand $(DEMO)/small.json --archive $(DEMO)/small.json.ctx.db -o $(DEMO)/restored.json
	$(BIN)/python -c "import json,sys; a=json.load(open('$(SAMPLE)')); b=json.load(open('$(DEMO)/restored.json')); sys.exit(a != b)" && echo "expand restored the original: identical records"

bench: install
	$(BIN)/ctxkit bench --suite all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
