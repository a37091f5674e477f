# Two commands on a fresh machine:  `make serve`  and  `make test`.
# Both create .venv, install torch==2.13.0 (CPU build) first, then the project with its dev extra.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: serve test setup clean

serve: setup
	$(BIN)/tandem serve

test: setup
	scripts/test.sh

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
