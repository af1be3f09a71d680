"""serve-bench: how much does batching help a served TensorFlow image model, on a GPU vs a CPU?"""

__version__ = "0.1.0"
