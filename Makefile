# The README's two commands. Both create or reuse .venv and install the project
# into it with every version pinned in constraints.txt.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.serve-bench-installed
# pip install, tried again when the registries drop a connection (tools/pip_install.sh says why)
PIP_INSTALL := bash tools/pip_install.sh

.PHONY: demo test lint format lock clean-results servers-env mutants

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) $(PY) --quiet --upgrade pip
	$(PIP_INSTALL) $(PY) --quiet -c constraints.txt -e '.[all]'
	touch $(STAMP)

# TF Serving's message descriptors ship in the package (serve_bench/_tfs_descriptors.binpb), so the plain
# install needs no TensorFlow; they are generated from the pinned tensorflow and tensorflow-serving-api wheels
# (after a new pin: make descriptors). tests/test_descriptors.py fails while the shipped file differs from them.
.PHONY: descriptors
descriptors: $(STAMP)
	$(PY) -m serve_bench._protos --write

# The servers nobody here wrote (real Triton 2.51, MLServer 1.7.1) run from an environment of their own,
# as they would from their containers: they need numpy<2 and protobuf<7, the project needs neither.
# serve_bench.servers finds it at .venv-servers (or $$SERVE_BENCH_SERVERS_ENV).
SERVERS_VENV ?= .venv-servers
SERVERS_STAMP := $(SERVERS_VENV)/.serve-bench-servers-installed

$(SERVERS_STAMP): servers-constraints.txt
	test -x $(SERVERS_VENV)/bin/python || $(PYTHON) -m venv $(SERVERS_VENV)
	$(PIP_INSTALL) $(SERVERS_VENV)/bin/python --quiet --upgrade pip
	$(PIP_INSTALL) $(SERVERS_VENV)/bin/python --quiet -c servers-constraints.txt nvidia-pytriton mlserver tensorflow onnxruntime openvino 'numpy<2'
	touch $(SERVERS_STAMP)

# perf_analyzer 2.51, Triton's C++ load generator (tools/perf_analyzer.sh says how), beside the servers
PERF_ANALYZER := $(SERVERS_VENV)/perf_analyzer/perf_analyzer
$(PERF_ANALYZER): tools/perf_analyzer.sh $(SERVERS_STAMP)
	bash tools/perf_analyzer.sh $(SERVERS_VENV)

servers-env: $(SERVERS_STAMP) $(PERF_ANALYZER)

demo: $(STAMP)
	$(VENV)/bin/serve-bench demo

# pytest exits 5 when it collects nothing: that is a broken suite, not a pass.
test: $(STAMP) $(SERVERS_STAMP) $(PERF_ANALYZER)
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

# Mutation testing of the statistics (mutmut, configured in pyproject.toml's [tool.mutmut]): a fresh run on a
# mutated copy under mutants/ (git-ignored), then the mutation score per module. Survivors: MUTANTS.md;
# look at one with `.venv/bin/mutmut show NAME`, all with `.venv/bin/mutmut browse`. First, the selection is
# checked for tests that leave TensorFlow or a native thread behind (children forked after them hang).
mutants: $(STAMP)
	$(PY) -m benchmarks.mutants_selection
	rm -rf mutants
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/mutmut run
	@$(VENV)/bin/mutmut results --all true | awk ' \
	  { n = $$1; sub(/:$$/, "", n); sub(/\.[^.]*$$/, "", n); st = $$0; sub(/^[^:]*: /, "", st); t[n]++; T++; \
	    if (st == "killed" || st == "timeout") { k[n]++; K++ } else if (st == "caught by type check") { c[n]++; C++ } \
	    else if (st == "survived") s[n]++; else o[n]++ } \
	  END { print "tests-only score (killed / mutants that type-check), per module; mypy --strict catches beside it:"; \
	    for (n in t) printf "  %-31s %5.1f%%  %4d / %4d  (mypy caught %d of %d; %d survived, %d not reached by a test)\n", \
	      n, (t[n] > c[n] ? 100 * k[n] / (t[n] - c[n]) : 100), k[n], t[n] - c[n], c[n], t[n], s[n], o[n] | "sort"; \
	    close("sort"); printf "  %-31s %5.1f%%  %4d / %4d  (mypy caught %d of %d)\n", "total", 100 * K / (T - C), K, T - C, C, T }'

clean-results:
	rm -rf results/

# The wheels a GPU machine (the device tool: Python 3.12, JAX, no TensorFlow, no network) needs for serve-bench
# with Keras 3 on JAX, into .whl/ (git-ignored; carry it). Fails past 16 MiB (WHEELS_BUDGET_MIB). benchmarks/gpu/README.md
.PHONY: gpu-wheels
gpu-wheels:
	PERF_ANALYZER_FROM=$(dir $(PERF_ANALYZER)) SKELETON_PYTHON=$(PY) bash benchmarks/gpu/wheels.sh

# The prepared GPU run (issue 31), in this environment: benchmarks/gpu/run.py's defaults measure InceptionV3,
# ResNet-50 and MobileNetV2 on the GPU (tf32, fp32) and its CPU. On a GPU host without this .venv, the device
# tool runs `bash benchmarks/gpu/visit.sh` with .whl carried (make gpu-wheels); see benchmarks/gpu/README.md.
.PHONY: gpu test-catalogue
gpu: $(STAMP)
	WHEELS=none PYTHON=$(PY) bash benchmarks/gpu/visit.sh $(GPU_ARGS)

# The jax copy of every catalogue model against TensorFlow's features (minutes; the default suite checks tiny).
test-catalogue: $(STAMP)
	SERVE_BENCH_CATALOGUE=1 $(PY) -m pytest -q tests/test_runtime_jax.py -k catalogue

# Coverage-guided fuzzing (atheris, libFuzzer for Python) of every parser of untrusted input: REST bodies,
# TensorProtos, v2 responses, sweep and tune specs, points.jsonl, TF Serving's config files (tests/_fuzz.py).
# FUZZ_SECONDS in all, shared by the targets; crashes and corpora in results/fuzz/. Last run: benchmarks/README.md.
FUZZ_SECONDS ?= 600
.PHONY: fuzz
fuzz: $(STAMP)
	nice $(PY) -m tests.fuzz_main --seconds $(FUZZ_SECONDS)
