# The two commands of the README. Both set up what is missing first
# (system packages, .venv, node_modules) via scripts/setup.sh.
PORT ?= 8000
PY := .venv/bin/python

.PHONY: setup run test lint

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) -m build_tools site
	$(PY) -m build_tools serve --port $(PORT)

test: setup lint
	$(PY) -m pytest

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
