"""Where the servers' own environment is: a Python venv with real Triton, MLServer and their TensorFlow.

Triton 2.51's Python backend needs numpy<2 in the model's environment (its stub returns
empty outputs under numpy 2) and nvidia-pytriton pins numpy<2; MLServer brings its own
pins. serve-bench itself runs numpy 2 and protobuf 7, so the servers live apart, as they
would in their containers. ``make servers-env`` builds it at ``.venv-servers``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from serve_bench.errors import UserError
from serve_bench.runtimes import record_in_servers

__all__ = ["ENV_VARIABLE", "ServersEnv", "require_runtime_package", "servers_env"]

ENV_VARIABLE = "SERVE_BENCH_SERVERS_ENV"
_DEFAULT = Path(__file__).resolve().parents[2] / ".venv-servers"
_INSTALL = "run `make servers-env` (builds .venv-servers from servers-constraints.txt)"


@dataclass(frozen=True)
class ServersEnv:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        found = sorted((self.root / "lib").glob("python3*/site-packages"))
        if not found:
            raise UserError(f"{self.root} holds no site-packages; {_INSTALL}")
        return found[-1]

    @property
    def python_version(self) -> str:
        return self.site_packages.parent.name.removeprefix("python")

    @property
    def triton_root(self) -> Path:
        return self.site_packages / "pytriton" / "tritonserver"

    @property
    def tritonserver(self) -> Path:
        return self.triton_root / "bin" / "tritonserver"

    @property
    def triton_libs(self) -> Path:
        return self.site_packages / "nvidia_pytriton.libs"

    @property
    def mlserver(self) -> Path:
        return self.root / "bin" / "mlserver"


def require_runtime_package(env: ServersEnv, runtime: str) -> None:
    """A model in the servers' environment on ``runtime`` needs a runner there and the package that runs it
    (the last its record names): one line saying how."""
    package = record_in_servers(runtime).packages[-1]
    if not (env.site_packages / package).is_dir():
        raise UserError(f"{env.root} has no {package} for runtime {runtime}; {_INSTALL}")


def servers_env(component: str = "Triton and MLServer") -> ServersEnv:
    """The servers' environment, or a UserError naming how to build it."""
    root = Path(os.environ.get(ENV_VARIABLE) or _DEFAULT)
    env = ServersEnv(root)
    if not env.python.exists():
        raise UserError(f"{component} need the servers' environment, not found at {root}; {_INSTALL}")
    return env
