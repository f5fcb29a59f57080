# Hearth: `make run` sets everything up and starts the app; `make test` runs the suite.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.hearth-installed

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint bench package clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip wheel

# Re-installs only when pyproject.toml changes. The first install compiles llama.cpp
# (several minutes); pip's wheel cache makes later installs quick.
$(STAMP): pyproject.toml | $(PY)
	@echo "Installing Hearth and its dependencies (the first time compiles llama.cpp: ~8 min)..."
	$(PY) -m pip install --quiet -e ".[test,demo]"
	@touch $(STAMP)

run: $(STAMP)
	$(PY) -m app setup-default-model
	$(PY) -m app

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 1; fi; exit $$rc

lint: $(STAMP)
	$(PY) -m ruff check app engine tests benchmarks packaging

bench: $(STAMP)
	$(PY) -m benchmarks.run_all

# A one-folder app and a .deb in dist/, built in its own venv with a portable llama.cpp
# (compiled with GGML_NATIVE=OFF: ~8 min the first time). See packaging/README.md.
package:
	PYTHON=$(PYTHON) packaging/build.sh

clean:
	rm -rf $(VENV) build dist .test-cache
