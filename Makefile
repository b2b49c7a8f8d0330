# flowlaws: the two commands of the README are `make book` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help env book test lab bench lint clean

help:
	@echo "make book   build the HTML book into _build/html (creates .venv when missing)"
	@echo "make test   run every test: library, notebooks (smoke size), nbval, browser"
	@echo "make lab    open JupyterLab on book/"
	@echo "make bench  print speed ratios measured side by side"
	@echo "make lint   ruff on the library, tests and notebooks"

# The environment is rebuilt when the pins or the package metadata change.
$(STAMP): requirements/pins.txt requirements/nodeps.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or: make PYTHON=python3 ...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/pins.txt
	$(PY) -m pip install --quiet --no-deps -r requirements/nodeps.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

env: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check lib tests bench tools book

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf _build _vendor .jupyter_cache
