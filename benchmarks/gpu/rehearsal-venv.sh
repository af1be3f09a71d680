#!/usr/bin/env bash
# Builds .venv-gpu-rehearsal: a CPU stand-in for the GPU machines' Python (image 'cuda', Python 3.12.3),
# holding the packages serve-bench and Keras find there, at the versions KINDS.md gives (jax, jaxlib, numpy,
# onnxruntime) and the newest of the others, and none of what wheels.sh carries. Then it installs the carried
# wheels exactly as a device run does (pip --no-index --no-deps --target) and checks that Keras runs on JAX.
#
#   benchmarks/gpu/rehearsal-venv.sh            # build (or reuse) the venv, install .whl/ into $SITE, check
#   PYTHON312=/path/python3.12 benchmarks/...   # another Python 3.12
#
# The image's JAX is the CUDA one (jax-cuda13-plugin); here jaxlib runs on the CPU: same Python code, same
# XLA front end, other back end. Python here is 3.12.x from pyenv, not 3.12.3 exactly.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${VENV:-.venv-gpu-rehearsal}
SITE=${SITE:-/tmp/site}
# The image's versions where KINDS.md's pip-list row gives one; the newest otherwise.
IMAGE_PINNED=(jax==0.11.2 jaxlib==0.11.2 numpy==2.5.2 onnx==1.23.1 onnxruntime==1.30.0)
IMAGE_OTHERS=(protobuf grpcio aiohttp prometheus-client rich h5py ml-dtypes absl-py matplotlib uvloop psutil pillow
              packaging typing-extensions setuptools)
CARRIED_NAMES="keras namex optree orjson hdrhistogram pbr"

find_python312() {
    if [ -n "${PYTHON312:-}" ]; then echo "$PYTHON312"; return; fi
    if python3.12 -c '' 2>/dev/null; then command -v python3.12; return; fi
    # pyenv's shim refuses python3.12 unless 3.12 is the selected version; take the interpreter itself
    local p
    for p in "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12; do
        if [ -x "$p" ]; then echo "$p"; return; fi
    done
    echo "no python3.12 found: set PYTHON312" >&2
    exit 1
}

if [ ! -x "$VENV/bin/python" ]; then
    py=$(find_python312)
    "$py" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet "${IMAGE_PINNED[@]}" "${IMAGE_OTHERS[@]}"
fi
"$VENV/bin/python" --version

# The venv must hold only what the image holds: every distribution in it is in image-packages.txt,
# and none of the carried ones is (else the wheels would not be tested). Allowed besides: tzdata, which
# python-dateutil 4 (matplotlib's) requires here and the image's list does not name.
"$VENV/bin/python" -m pip list --format=freeze | sed 's/==.*//' | tr 'A-Z_.' 'a-z--' | grep -vx tzdata |
    sort >"$VENV/.names"
grep -v '^#' benchmarks/gpu/image-packages.txt | sort >"$VENV/.image-names"
extra=$(comm -23 "$VENV/.names" "$VENV/.image-names")
if [ -n "$extra" ]; then
    echo "rehearsal venv holds distributions the image does not: $extra" >&2
    exit 1
fi
for name in $CARRIED_NAMES; do
    if grep -qx "$name" "$VENV/.names"; then
        echo "rehearsal venv already holds $name, which the wheels must bring" >&2
        exit 1
    fi
done
"$VENV/bin/python" -m pip list --format=freeze | grep -iE '^(jax|jaxlib|numpy|onnxruntime|protobuf|grpcio|aiohttp|h5py|ml.dtypes|rich|setuptools)=='

# What a device run does with the carried wheels (the device README's recipe), with this venv's python.
ls .whl/*.whl >/dev/null
rm -rf "$SITE"
"$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
export PYTHONPATH=$SITE
KERAS_BACKEND=jax "$VENV/bin/python" -c "import keras, jax; print(keras.__version__, jax.__version__, keras.backend.backend())"
echo "serve_bench imports and a TF Serving message without TensorFlow (PYTHONPATH=$SITE:$PWD):"
PYTHONPATH=$SITE:$PWD "$VENV/bin/python" -c "
import serve_bench.client, serve_bench.stats, serve_bench.load
from serve_bench import _protos
print('ok', _protos.message('tensorflow.serving.PredictRequest').DESCRIPTOR.full_name)"
