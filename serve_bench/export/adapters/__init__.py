"""Model code that runs inside the servers nobody here wrote, in *their* environment: adapters between
those servers' model interfaces and serve-bench's runners.

``triton_model.py`` is a Triton Python-backend model (``<version>/model.py``) and
``mlserver_runtime.py`` an MLServer runtime. Neither is imported by serve-bench: export
copies them into the model repositories, with the runners' one file
(``serve_bench/runtimes/_runners.py``, as ``serve_bench_runners.py``) beside them, and the
servers import them (with ``triton_python_backend_utils`` / ``mlserver``, which serve-bench's
environment lacks, and without serve-bench, which theirs lacks).
"""
