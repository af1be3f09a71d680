"""``python -m serve_bench.runtimes._jax_child COPY IMAGES.npy FEATURES.npy [PRECISION]``: a jax copy's features
on the CPU (float32 unless PRECISION says otherwise).

Run by :func:`serve_bench.runtimes._jax.features_in_child` with KERAS_BACKEND=jax, from a process
that holds Keras on TensorFlow (export checks its copy against TensorFlow's answers this way).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def main(argv: list[str]) -> int:
    copy, given, answered = (Path(a) for a in argv[:3])
    from serve_bench.runtimes._jax import JaxRunner

    runner = JaxRunner(copy, "cpu", argv[3] if len(argv) > 3 else "fp32")
    np.save(answered, runner({"images": np.load(given)})["features"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
