# Two entry points for a fresh machine (see README): `make demo` and `make test`.
# Both create .venv, install the CPU stack (torch==2.13.0 pinned) and neuronprobe.

VENV ?= .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install system-deps xla-env lint docs demo test bench clean

$(VENV)/.installed: pyproject.toml requirements/cpu.txt requirements/hf.txt requirements/dev.txt requirements/docs.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -r requirements/dev.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

install: $(VENV)/.installed

# Debian packages the tests need (headless Chromium for the browser test).
system-deps:
	bash scripts/install-system-deps.sh

demo: install
	$(VENV)/bin/neuronprobe analyze examples/tiny_gpt.py --lengths examples/traffic_lengths.txt

# The xla-cpu backend's torch 2.9 + torch-xla 2.9 environment (about 7 GB), once per machine:
# `neuronprobe setup xla-cpu` reuses a complete one. A failure does not stop `make test`:
# the xla-cpu tests then fail with the reason.
xla-env: install
	-$(VENV)/bin/neuronprobe setup xla-cpu

# ruff (lint and format), mypy and import-linter (the layers of ARCHITECTURE.md), configured in
# pyproject.toml: a violation fails `make test`.
lint: install
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# The documentation site (mkdocs.yml, pages under docs/) into site/. --strict: a broken link or anchor,
# or a page missing from the nav, fails the build (about 2 s). The pages' examples are run by
# tests/test_docs_examples.py.
docs: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# Two workers (the machines this runs on have two cores), each taking whole test files: a file's
# module fixtures (a notebook kernel, a browser) stay in one process. About half the serial time.
# Files are handed out in collection order, where tests/conftest.py puts the longest first
# (pytest-xdist's default order, most tests first, left the longest few-test files for the end).
TEST_WORKERS ?= 2

test: install system-deps xla-env lint docs
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

bench: install
	$(PY) benchmarks/bench_analyze.py

clean:
	rm -rf $(VENV) reports/*.json reports/*.html test-artifacts site
