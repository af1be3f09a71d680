"""Leave-one-device-out errors of `serve-bench predict` on the published tables it ships.

For each precision class (fp32/tf32, mixed), each device family of NVIDIA DeepLearningExamples'
ResNet-50 v1.5 TensorFlow 1 inference tables (T4, V100 16/32 GB, A100 40 GB; batch 1-256) is
left out of the fit in turn and predicted from its peaks alone; printed: per device the median
and worst relative error of images/s and the error of the batching gain at the best batch.
tests/test_predict.py pins the medians printed here to the ones in benchmarks/README.md.

Run: .venv/bin/python benchmarks/predict_validation.py
"""

from __future__ import annotations

from serve_bench.predict import calibration


def main() -> None:
    for klass in ("fp32", "mixed"):
        eff, loo = calibration(klass)
        print(
            f"{klass}: fitted on all: compute {eff.compute:.2f} of peak, memory {eff.memory:.2f} of bandwidth, "
            f"{eff.per_op_s * 1e6:.1f} µs per op"
        )
        for d in loo.devices:
            print(f"  {d.device:10s} images/s median {d.median:6.1%} worst {d.worst:6.1%}   gain {d.gain_error:+6.1%}")
        print(
            f"  all        images/s median {loo.median:6.1%} worst {loo.worst:6.1%}   "
            f"|gain| median {loo.gain_median:.1%} worst {loo.gain_worst:.1%}"
        )


if __name__ == "__main__":
    main()
