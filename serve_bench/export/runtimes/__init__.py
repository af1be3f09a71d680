"""Model code that runs inside the servers nobody here wrote, in *their* environment.

``triton_model.py`` is a Triton Python-backend model (``<version>/model.py``) and
``mlserver_runtime.py`` an MLServer runtime. Neither is imported by serve-bench: export
copies them into the model repositories, and the servers import them (with
``triton_python_backend_utils`` / ``mlserver``, which serve-bench's environment lacks).
"""
