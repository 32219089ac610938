# make install: create .venv when missing (CPU torch first, so pip never fetches a CUDA build),
# then the project with its dev extras. make test: install, ruff, mypy, pytest.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint bench bench-startup bench-ingest soak run clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	# export the embedding model to ONNX now (once, offline), not on the first query
	$(BIN)/tiermem model || echo "tiermem model failed: the first embedding exports it (or falls back to torch)"
	touch $(STAMP)

lint: install
	$(BIN)/ruff check tiermem tiers planner consolidation evals tests
	$(BIN)/mypy tiermem  # tiermem/{tiers,planner,consolidation,evals} link the top-level folders

test: lint
	$(BIN)/pytest

bench: install
	$(BIN)/python -m tiermem.evals.bench

bench-startup: install
	$(BIN)/python -m tiermem.evals.bench_startup

bench-ingest: install
	$(BIN)/python -m tiermem.evals.bench_ingest

soak: install
	TIERMEM_SOAK=1 $(BIN)/pytest tests -m soak

run: install
	$(BIN)/tiermem serve --no-auth

clean:
	rm -rf $(VENV) build *.egg-info
