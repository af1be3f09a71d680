#!/usr/bin/env bash
# perf_analyzer (Triton's C++ load generator, 2.51: the binary inside the tritonclient 2.51.0 wheel) into
# VENV/perf_analyzer/: a C++ client beside serve-bench's own, for benchmarks/server_overhead.py --perf-analyzer and
# tests/test_perf_analyzer.py. The wheel is unpacked, not installed: VENV keeps the tritonclient nvidia-pytriton wants.
# The binary links libb64.so.0d (nvidia-pytriton bundles it) and libcudart.so.12 (nvidia-cuda-runtime-cu12: loaded at
# start, no GPU needed); both go beside it in lib/.
#
#   tools/perf_analyzer.sh VENV        # VENV: the servers' environment (make servers-env), whose python downloads
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1
pins=(tritonclient==2.51.0 nvidia-cuda-runtime-cu12==12.9.79)
target=$venv/perf_analyzer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for ((try = 1; ; try++)); do  # the registries drop connections (tools/pip_install.sh)
    if "$venv/bin/python" -m pip download --quiet --retries 10 --no-deps --only-binary=:all: -d "$work" "${pins[@]}"; then
        break
    fi
    [ "$try" -lt 3 ] || { echo "tools/perf_analyzer.sh: pip download failed $try times: pip's error is above" >&2; exit 1; }
done
"$venv/bin/python" - "$work" <<'PY'
import sys, zipfile
from pathlib import Path

work = Path(sys.argv[1])
for wheel in work.glob("*.whl"):
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith("/bin/perf_analyzer") or name.endswith("/lib/libcudart.so.12"):
                (work / Path(name).name).write_bytes(archive.read(name))
PY
b64=$(readlink -f "$(ls "$venv"/lib/python3*/site-packages/nvidia_pytriton.libs/libb64-*.so.0d | head -n 1)")
# built beside, moved into place once it starts: a failed build leaves no target make would take as done
rm -rf "$target.new" && mkdir -p "$target.new/lib"
install -m 755 "$work/perf_analyzer" "$target.new/perf_analyzer"
install -m 644 "$work/libcudart.so.12" "$target.new/lib/libcudart.so.12"
ln -s "$b64" "$target.new/lib/libb64.so.0d"
"$venv/bin/python" -m benchmarks.perf_analyzer "$target.new"  # it starts (benchmarks/perf_analyzer.py says how)
rm -rf "$target" && mv "$target.new" "$target"
echo "perf_analyzer: $target/perf_analyzer"
