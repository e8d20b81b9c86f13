# Two commands a newcomer needs:  `make demo` (simulate Dragonet locally)  and  `make test`.
# Both install what they need into .venv/ (Python packages) and .tools/ (the helm binary).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The web view's browser test (tests/test_view_browser.py) drives Debian's Chromium through
# Playwright (which cannot download its own browsers here): installed when it is missing.
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: demo test test-slow test-all lint helm clean pictures chromium

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[sim,test]'
	touch $(STAMP)

.tools/bin/helm: scripts/install-helm.sh
	bash scripts/install-helm.sh .tools

helm: .tools/bin/helm

$(CHROMIUM):
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium

chromium: $(CHROMIUM)

demo: $(STAMP)
	$(BIN)/dragonet simulate

# The tests run on every core (pytest-xdist), each file on one worker (--dist loadfile: a
# module's fixtures, its servers, browser and simulated runs, are made once; xdist_group
# marks are not used, as pytest-xdist 3.8's loadgroup ignores them under pytest 9.2).
# `make test` leaves out the tests marked slow (whole traces, benchmarks, fuzz campaigns,
# a real server under load or real deadlines, a real browser: pyproject.toml's markers);
# `make test-slow` runs only those,
# and `make test-all` both, as CI does (.ci/run).
# Bytecode caches are written even where the environment turns them off
# (PYTHONDONTWRITEBYTECODE=1): else each worker, and each server a test starts, compiles every
# module and re-rewrites every test file from source (collection took 18 s, not 7).
PYTEST := PATH="$(CURDIR)/.tools/bin:$$PATH" PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -n auto --dist loadfile

test: $(STAMP) .tools/bin/helm $(CHROMIUM)
	$(BIN)/ruff check .
	$(PYTEST) -m "not slow"

test-slow: $(STAMP) .tools/bin/helm $(CHROMIUM)
	$(PYTEST) -m slow

test-all: test test-slow

# The pictures in docs/pictures/ (README, docs/simulator.md), every policy each:
# examples/elastic.yaml; the first 40 and the first 160 jobs of Pollux's workload-1; 200 jobs
# of Philly's busy part (the benchmarks' slice; PHILLY is the workspace's trace); and the web
# view of examples/elastic.yaml (view.png, a screenshot in headless Chromium). About an hour
# on one busy core, most of it the 160 Pollux jobs.
PHILLY ?= ../shared/traces/philly_pollux/philly.csv
pictures: $(STAMP) $(CHROMIUM)
	$(BIN)/python scripts/view_screenshot.py
	$(BIN)/dragonet simulate examples/elastic.yaml --plot docs/pictures/elastic.png
	$(BIN)/dragonet simulate --trace tests/fixtures/traces/workload-1.csv --jobs 40 \
	  --plot docs/pictures/pollux-40.png
	$(BIN)/dragonet simulate --trace tests/fixtures/traces/workload-1.csv --jobs 160 \
	  --plot docs/pictures/pollux-160.png
	$(BIN)/dragonet simulate --trace $(PHILLY) --start 72500 --jobs 200 \
	  --plot docs/pictures/philly-200.png

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .tools .pytest_cache .ruff_cache .hypothesis
