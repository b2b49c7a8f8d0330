# flowlaws: the README's two commands are `make book` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
VENDOR := _vendor/.complete
JB_FLAGS := -W -n --keep-going

.PHONY: help env book test lab bench lint clean chromium gpu-check full

help:
	@echo "make book   build the HTML book into _build/html (creates .venv when missing)"
	@echo "make test   run every test: library, notebooks at smoke size, nbval, browser"
	@echo "make lab    open JupyterLab on book/"
	@echo "make bench  print speed ratios measured side by side"
	@echo "make lint   ruff on the library, tests, tools and notebooks"
	@echo "make gpu-check  on a CUDA machine: unit tests, notebooks on cuda, the full presets that need a GPU"
	@echo "make full [CHAPTER=08_real_data] [WORKERS=2]  run full presets, store their results"

# The environment is (re)built when the pins or the package metadata change.
$(STAMP): requirements/pins.txt requirements/nodeps.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need Python 3.11 on PATH (or: make PYTHON=/path/to/python3.11 ...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/pins.txt
	$(PY) -m pip install --quiet --no-deps -r requirements/nodeps.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# MathJax, require.js, the widget manager and the chart libraries, served from the build.
$(VENDOR): tools/vendor_assets.py requirements/pins.txt | $(STAMP)
	$(PY) tools/vendor_assets.py --out _vendor
	touch $(VENDOR)

env: $(STAMP) $(VENDOR)

# The execution cache knows the notebooks, not the library: when flowlaws changes, every
# notebook is executed again (the fingerprint hashes every .py under lib/flowlaws, recursively).
book: env
	@fingerprint=$$($(PY) -c "from flowlaws.book.cache import library_fingerprint; print(library_fingerprint())"); \
	if [ "$$(cat _build/.library-fingerprint 2>/dev/null)" != "$$fingerprint" ]; then \
	  rm -rf _build/.jupyter_cache _build/.doctrees; mkdir -p _build; echo "$$fingerprint" > _build/.library-fingerprint; \
	  echo "flowlaws changed since the last build: executing every notebook"; fi
	$(VENV)/bin/jupyter-book build . $(JB_FLAGS)
	@echo "open _build/html/index.html"

# Debian's chromium for the browser test (never a browser downloaded by a test tool).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null || { echo "apt-get install chromium failed"; exit 1; }; \
	  else echo "no /usr/bin/chromium and no root apt-get: the browser test will be skipped"; fi; \
	fi

test: env chromium
	$(PY) -m pytest tests

# As root (containers, cloud machines) Jupyter refuses to start without --allow-root. The port
# is fixed (no retries), so the address printed first is the one served; LAB_IP=0.0.0.0 serves
# other machines too. Jupyter then prints the same address with its token: open that one.
# JUPYTER_CONFIG_PATH adds jupyter_server_config.py (a saved notebook keeps static figures).
LAB_IP ?= 127.0.0.1
LAB_PORT ?= 8888
lab: env
	@echo "JupyterLab on book/ at http://$(LAB_IP):$(LAB_PORT)/lab (open the ?token= link below; Ctrl-C stops it)"
	JUPYTER_CONFIG_PATH="$(CURDIR)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(VENV)/bin/jupyter lab book/ --ip=$(LAB_IP) --port=$(LAB_PORT) --ServerApp.port_retries=0 \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root)

lint: env
	$(VENV)/bin/ruff check lib tests bench tools book jupyter_server_config.py

bench: env
	$(PY) -m bench

# Under 8 minutes on a GPU; refuses without CUDA (tools/gpu_check.py --cpu-smoke tests its path).
gpu-check: env
	$(PY) tools/gpu_check.py

# A chapter's full preset (or all CPU ones), stored under book/02_percolation/stored/; chunks of
# runs are cached as they finish, so an interrupted run resumes. WORKERS=2: a LocalCluster;
# FLOWLAWS_DASK_SCHEDULER=tcp://host:8786: a Dask cluster.
CHAPTER ?= all
full: env
	nice -n 10 $(PY) tools/full.py --chapter $(CHAPTER) $(if $(WORKERS),--workers $(WORKERS),)

clean:
	rm -rf _build _vendor
