#!/usr/bin/env bash
# `make gpu-wheels`: downloads into .whl/ (git-ignored) the wheels that serve-bench and Keras 3 on JAX need
# on the GPU machines and that their image lacks, for CPython 3.12 on manylinux x86-64, with the device
# README's recipe (pip download --no-deps --only-binary=:all: ...). Versions: constraints.txt's pin where it
# has one, else the one below. Then checks with requires.py that the wheels plus the image meet every
# Requires-Dist, copies perf_analyzer beside them (.whl/perf_analyzer), prints the sizes, and fails past
# WHEELS_BUDGET_MIB (default 16) or past the device's 64 MiB for wheels, perf_analyzer and working tree. A device run then starts with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#       .whl/*.whl && export PYTHONPATH=/tmp/site || exit;
# (carry: [".whl"]). Why each wheel: benchmarks/gpu/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

WHL=${WHL:-.whl}
BUDGET_MIB=${WHEELS_BUDGET_MIB:-16}
DEVICE_LIMIT_MIB=64
PYTHON=${PYTHON:-python3}
# name=version used when constraints.txt pins none (it pins Keras's own only while TensorFlow is installed)
CARRY=(keras=3.15.1 namex=0.1.0 optree=0.20.0 orjson=3.13.0 hdrhistogram=0.10.8 pbr=7.1.3)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64)
# tried when none of the above matches (pip matches manylinux_2_N exactly)
MORE_PLATFORMS=(manylinux_2_24_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64
                manylinux_2_39_x86_64)

norm() { tr 'A-Z_.' 'a-z--' <<<"$1"; }

# constraints.txt's pin of a distribution, names compared as pip does
pinned() {
    local want line
    want=$(norm "$1")
    while IFS= read -r line; do
        case "$line" in '#'* | '') continue ;; esac
        if [ "$(norm "${line%%==*}")" = "$want" ]; then echo "${line#*==}"; return; fi
    done <constraints.txt
}

download() {  # name version
    local spec="$1==$2" args=() p
    for p in "${PLATFORMS[@]}"; do args+=(--platform "$p"); done
    if "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${args[@]}" -d "$WHL" "$spec"; then return; fi
    for p in "${MORE_PLATFORMS[@]}"; do
        if "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            "${args[@]}" --platform "$p" -d "$WHL" "$spec" 2>/dev/null; then return; fi
    done
    # No wheel at all: a pure-Python sdist builds into a py3-none-any wheel here that installs anywhere;
    # one with compiled code would build for this machine's Python, not the host's, and is refused.
    echo "wheels.sh: no wheel of $spec for cp312 manylinux x86-64; building one from its sdist" >&2
    local tmp
    tmp=$(mktemp -d)
    "$PYTHON" -m pip download -q --no-deps --no-binary=:all: -d "$tmp/sdist" "$spec"
    "$PYTHON" -m pip wheel -q --no-deps -w "$tmp/wheel" "$tmp"/sdist/*
    local built
    built=$(ls "$tmp"/wheel/*.whl)
    case "$built" in
        *-none-any.whl) mv "$built" "$WHL"/ ;;
        *) echo "wheels.sh: $spec has compiled code and no cp312 manylinux wheel: $(basename "$built")" >&2
           rm -rf "$tmp"; exit 1 ;;
    esac
    rm -rf "$tmp"
}

mkdir -p "$WHL"
roots=()
for entry in "${CARRY[@]}"; do
    name=${entry%%=*}
    version=$(pinned "$name")
    from=constraints.txt
    if [ -z "$version" ]; then version=${entry#*=}; from=wheels.sh; fi
    # one version of each distribution, or the device's pip install refuses them all
    for old in "$WHL"/*.whl; do
        [ -e "$old" ] || continue
        base=$(basename "$old")
        if [ "$(norm "${base%%-*}")" = "$(norm "$name")" ] && [ "$(cut -d- -f2 <<<"$base")" != "$version" ]; then
            echo "removing $base (other version)"
            rm -f "$old"
        fi
    done
    download "$name" "$version"
    echo "$name==$version ($from)"
    if [ "$name" = keras ]; then roots+=("$name==$version"); fi
done

echo "requirements (serve-bench's less TensorFlow, and Keras's), and what meets each on the GPU machines:"
"$PYTHON" benchmarks/gpu/requires.py "$WHL" "${roots[@]}"

echo "wheels in $WHL:"
ls -l "$WHL"/*.whl | awk '{printf "  %9d  %s\n", $5, $NF}'
wheel_bytes=$(cat "$WHL"/*.whl | wc -c)

# perf_analyzer (Triton's C++ client, tools/perf_analyzer.sh) travels too, its libraries copied, not linked: the
# overhead step measures the GPU's server with it beside serve-bench's client (visit.sh points run.py at it)
PERF_ANALYZER_FROM=${PERF_ANALYZER_FROM:-.venv-servers/perf_analyzer}  # make gpu-wheels names the Makefile's
rm -rf "$WHL/perf_analyzer"
if [ -x "$PERF_ANALYZER_FROM/perf_analyzer" ]; then
    cp -rL "$PERF_ANALYZER_FROM" "$WHL/perf_analyzer"
    echo "perf_analyzer in $WHL/perf_analyzer: $(du -sb "$WHL/perf_analyzer" | cut -f1) bytes"
else
    echo "wheels.sh: no perf_analyzer at $PERF_ANALYZER_FROM (make servers-env): the visit's overhead step goes without it" >&2
fi
pa_bytes=$( (du -sb "$WHL/perf_analyzer" 2>/dev/null || echo 0) | cut -f1)

# ONNX skeletons (benchmarks/gpu/onnx_skeletons.py: each model converted by tf2onnx here, its large weights left out,
# about 0.25 MiB for four): the host's CPU measured with ONNX Runtime on copies drawn from them (run.py
# --cpu-runtime onnxruntime; visit.sh points the run at them). Converting needs TensorFlow: make's .venv.
SKELETON_PYTHON=${SKELETON_PYTHON:-.venv/bin/python}  # make gpu-wheels names the Makefile's
rm -rf "$WHL/onnx"
if "$SKELETON_PYTHON" -c "import tensorflow, tf2onnx" >/dev/null 2>&1; then
    "$SKELETON_PYTHON" benchmarks/gpu/onnx_skeletons.py --out "$WHL/onnx" 2>&1 | grep -v -E '^(WARNING|[IWE][0-9]{4}) ' || true
    [ -s "$WHL/onnx/inception_v3.onnx" ] || { echo "wheels.sh: the ONNX skeletons were not written" >&2; exit 1; }
else
    echo "wheels.sh: no TensorFlow with tf2onnx for $SKELETON_PYTHON (make): the visit's CPU is measured by XLA:CPU alone" >&2
fi
onnx_bytes=$( (du -sb "$WHL/onnx" 2>/dev/null || echo 0) | cut -f1)
# what a device call sends besides carried paths: tracked and untracked-but-not-ignored files
tree_bytes=$( (git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true) |
    awk '{ s += $1 } END { print s + 0 }')
mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }
carried=$((wheel_bytes + pa_bytes + onnx_bytes + tree_bytes))
echo "total: $(mib "$wheel_bytes") MiB of wheels (budget $BUDGET_MIB MiB); with perf_analyzer ($(mib "$pa_bytes") MiB)," \
    "the ONNX skeletons ($(mib "$onnx_bytes") MiB) and the working tree ($(mib "$tree_bytes") MiB): $(mib "$carried") MiB" \
    "of the device's $DEVICE_LIMIT_MIB MiB"
if [ "$wheel_bytes" -gt $((BUDGET_MIB * 1048576)) ]; then
    echo "wheels.sh: $WHL is over its budget of $BUDGET_MIB MiB" >&2
    exit 1
fi
if [ "$carried" -gt $((DEVICE_LIMIT_MIB * 1048576)) ]; then
    echo "wheels.sh: wheels, perf_analyzer, skeletons and tree are over the device's $DEVICE_LIMIT_MIB MiB" >&2
    exit 1
fi
