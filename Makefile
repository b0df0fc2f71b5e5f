# The two commands the README promises: `make demo` and `make test`. Both run `make setup`
# first, which is idempotent: a stamp file keyed on pyproject.toml means a second run
# installs nothing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
TORCH  := torch==2.13.0
STAMP  := $(VENV)/.selfattn-installed
CHROMIUM := /usr/bin/chromium

.PHONY: setup browser demo toy test lint typecheck unit bench docs clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The pinned CPU wheel first: a bare `torch` resolved from scratch is a CUDA build.
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

# tests/explore drive Debian's Chromium through Playwright. As root, install it when it is
# missing; otherwise say how (the tests then skip, or fail where CI=true).
browser:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing chromium for the browser tests (apt-get)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else \
		echo "browser tests need $(CHROMIUM): sudo apt-get install chromium chromium-driver"; \
	fi

demo: setup
	$(VENV)/bin/selfattn demo

toy: setup
	$(VENV)/bin/selfattn toy

# lint-imports checks the package's layering ([tool.importlinter] in pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/lint-imports --no-cache

typecheck: setup
	$(VENV)/bin/mypy

unit: setup browser
	$(PY) -m pytest -q -m "not gpu" --durations=25

test: lint typecheck unit

bench: setup
	$(PY) benchmarks/attention.py

# The documentation site (mkdocs.yml) into site/: open site/index.html. Strict, so a broken
# link or an API reference that does not resolve fails; never -q, which hides the warnings
# strict mode counts.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) build dist site *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
