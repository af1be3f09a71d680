# The README's two commands. Both create or reuse .venv and install the project
# into it with every version pinned in constraints.txt.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.serve-bench-installed

.PHONY: demo test lint format lock clean-results

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[all]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/serve-bench demo

# pytest exits 5 when it collects nothing: that is a broken suite, not a pass.
test: $(STAMP)
	$(PY) -m pytest -q -ra $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

# The checks that keep the code in shape: lint and formatting (ruff), types (mypy --strict,
# configured in pyproject.toml). `make format` applies ruff's formatting and safe fixes.
LINTED := serve_bench tests benchmarks examples loadtests
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff check --fix $(LINTED)
	$(VENV)/bin/ruff format $(LINTED)

lock: $(STAMP)
	$(PY) -m pip freeze --exclude-editable | sed '1i # Every package version verified together on Python 3.11 (pip freeze of a working .venv).\n# Installed with `pip install -c constraints.txt`; regenerate with `make lock`.' > constraints.txt

clean-results:
	rm -rf results/
