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
# Rehearsed on this CPU, with Python 3.12 and the image's versions, by benchmarks/gpu/rehearse.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu-visit-out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
HARD_LIMIT_S=${HARD_LIMIT_S:-520}   # the call allows 560: leave time to pack and send
BUDGET_S=${BUDGET_S:-330}           # no step starts past this; the last one ends before the hard limit

WHEELS=${WHEELS:-.whl}              # WHEELS=none: the interpreter has everything (this CPU's .venv)
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl \
        || { echo "visit.sh: the carried wheels did not install" >&2; exit 3; }
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
{
    date -u +%FT%TZ
    nvidia-smi 2>&1 || echo "no nvidia-smi"
    "$PYTHON" -c 'import sys; print(sys.version)'
    "$PYTHON" -m pip list 2>/dev/null | grep -i -E '^(jax|jaxlib|jax-cuda|keras|numpy|grpcio|protobuf|aiohttp|ml.dtypes|nvidia-ml-py) '
} >"$OUT/host.txt" 2>&1
RUN=/tmp/gpu-run-$(date -u +%Y%m%dT%H%M%SZ)
timeout --signal=TERM --kill-after=10 "$HARD_LIMIT_S" \
    "$PYTHON" benchmarks/gpu/run.py --out "$RUN" --archive "$OUT/gpu-run.tar.gz" --budget-s "$BUDGET_S" "$@" \
    2>&1 | tee "$OUT/log.txt"
status=${PIPESTATUS[0]}
cp "$RUN/progress.jsonl" "$OUT/" 2>/dev/null || true
echo "visit.sh: run.py exited $status; results in $OUT" | tee -a "$OUT/log.txt"
exit "$status"
