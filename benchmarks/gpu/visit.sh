#!/usr/bin/env bash
# One GPU visit, as the device tool runs it from the repository's root (no network, no TensorFlow there):
#
#   make gpu-wheels                                   # here, once: .whl/ (git-ignored), carried
#   device run: command="bash benchmarks/gpu/visit.sh", carry=[".whl"], timeout_s=560
#
# Installs the carried wheels beside the image's packages (the device README's recipe), writes what the
# host is (nvidia-smi, the packages serve-bench uses), and runs benchmarks/gpu/run.py under a hard limit
# a little inside the call's, with a step budget inside that. What comes back under $OUT (four files):
# gpu-run.tar.gz (every finished step's run directories, packed again after each step), progress.jsonl,
# log.txt, host.txt. Extra arguments go to run.py (the rehearsal here passes --models tiny --devices cpu).
# Rehearsed on this CPU, with Python 3.12 and the image's versions, by benchmarks/gpu/rehearsal-venv.sh and the
# README's rehearsal command.
set -uo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
-h | --help) # what this script does, then run.py's options: nothing is installed, run or written
    sed -n '2,/^set /{/^#/s/^# \{0,1\}//p;}' benchmarks/gpu/visit.sh
    echo
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" benchmarks/gpu/run.py --help 2>/dev/null ||
        echo "run.py's options: python benchmarks/gpu/run.py --help, where serve-bench is installed"
    exit 0
    ;;
esac
OUT=${OUT:-/tmp/gpu-visit-out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
# run.py is stopped this many seconds after this script started (the install and the host's record take seconds
# too): the call allows 560, leave time to pack and send
END_S=${END_S:-520}
# no step starts past this: the last has about 110 s before the hard limit, and one cut short by it still
# brings back what it measured (run.py packs on SIGTERM)
BUDGET_S=${BUDGET_S:-400}

# What the host is, first: a failed install below still brings it back.
{
    date -u +%FT%TZ
    nvidia-smi 2>&1 || echo "no nvidia-smi"
    "$PYTHON" -c 'import sys; print(sys.version)'
    "$PYTHON" -m pip list 2>/dev/null |
        grep -i -E '^(jax|jaxlib|jax-cuda[0-9a-z-]*|keras|numpy|grpcio|protobuf|aiohttp|ml.dtypes|nvidia-ml-py|nvidia-cudnn[0-9a-z-]*|nvidia-cublas[0-9a-z-]*|nvidia-cuda-nvcc[0-9a-z-]*) '
    echo "environment:"
    env | grep -E '^(XLA_|JAX_|TF_|NVIDIA_|CUDA_|LD_LIBRARY_PATH|KERAS_|PYTHONPATH)' | sort
} >"$OUT/host.txt" 2>&1

WHEELS=${WHEELS:-.whl}              # WHEELS=none: the interpreter has everything (this CPU's .venv)
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl \
        >>"$OUT/log.txt" 2>&1 || { echo "visit.sh: the carried wheels did not install" | tee -a "$OUT/log.txt" >&2; cat "$OUT/log.txt" >&2; exit 3; }
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
# perf_analyzer carried beside the wheels (wheels.sh): the overhead step runs it (benchmarks/perf_analyzer.py)
if [ -x "$WHEELS/perf_analyzer/perf_analyzer" ]; then
    SERVE_BENCH_PERF_ANALYZER=$(cd "$WHEELS/perf_analyzer" && pwd) && export SERVE_BENCH_PERF_ANALYZER
fi
# ONNX skeletons carried beside them (wheels.sh): --cpu-runtime onnxruntime draws the CPU's copies from them
if [ -d "$WHEELS/onnx" ]; then
    SERVE_BENCH_ONNX_SKELETONS=$(cd "$WHEELS/onnx" && pwd) && export SERVE_BENCH_ONNX_SKELETONS
fi
{
    # what JAX and Keras see, with the wheels (the runs refuse a GPU that JAX does not see)
    echo "jax and keras, as the run sees them:"
    KERAS_BACKEND=jax XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 60 "$PYTHON" -c '
import jax, jaxlib, keras
print("jax", jax.__version__, "jaxlib", jaxlib.__version__, "keras", keras.__version__, keras.backend.backend())
print("default backend", jax.default_backend(), "devices", jax.devices())' 2>&1 | tail -n 20
} >>"$OUT/host.txt"
RUN=/tmp/gpu-run-$(date -u +%Y%m%dT%H%M%SZ)
HARD_LIMIT_S=${HARD_LIMIT_S:-$((END_S - SECONDS))}
echo "visit.sh: $SECONDS s before run.py; its hard limit: $HARD_LIMIT_S s" >>"$OUT/log.txt"
timeout --signal=TERM --kill-after=10 "$HARD_LIMIT_S" \
    "$PYTHON" benchmarks/gpu/run.py --out "$RUN" --archive "$OUT/gpu-run.tar.gz" --budget-s "$BUDGET_S" "$@" \
    2>&1 | tee -a "$OUT/log.txt"
status=${PIPESTATUS[0]}
cp "$RUN/progress.jsonl" "$OUT/" 2>/dev/null || true
echo "visit.sh: run.py exited $status; results in $OUT" | tee -a "$OUT/log.txt"
exit "$status"
