"""Start, wait for and stop the servers serve-bench measures on this machine.

    LocalServerProcess  the local server (`serve-bench serve`), TF Serving's batching as imitated here
    TritonServer    real Triton 2.51 (the nvidia-pytriton wheel's binary), Python backend
    MLServerServer  real MLServer 1.7.1
    ServerProcess   the lifecycle both share (start, wait until ready, SIGTERM, SIGKILL)
    KINDS, kind()   the server kinds (local, tfserving, triton, mlserver): knobs with the server's own
                    defaults, configuration, process; one module each

Both run from the servers' own environment (``make servers-env``), bind 127.0.0.1 on
free ports, and serve a model exported by ``serve-bench export``.
"""

from serve_bench.servers._env import ENV_VARIABLE, ServersEnv, require_runtime_package, servers_env
from serve_bench.servers._kind import SIZES, Knob, Serve, ServerKind
from serve_bench.servers._local import LocalServerProcess
from serve_bench.servers._mlserver import MLServerServer
from serve_bench.servers._ports import free_port
from serve_bench.servers._process import ServerProcess, StartFailed, V2ServerProcess, http_ok, log_tail
from serve_bench.servers._registry import KINDS, LAUNCHABLE, UnknownKind, kind, kind_knob
from serve_bench.servers._triton import TritonServer

__all__ = [
    "ENV_VARIABLE",
    "KINDS",
    "LAUNCHABLE",
    "SIZES",
    "Knob",
    "LocalServerProcess",
    "MLServerServer",
    "Serve",
    "ServerKind",
    "ServerProcess",
    "ServersEnv",
    "StartFailed",
    "TritonServer",
    "UnknownKind",
    "V2ServerProcess",
    "free_port",
    "http_ok",
    "kind",
    "kind_knob",
    "log_tail",
    "require_runtime_package",
    "servers_env",
]
