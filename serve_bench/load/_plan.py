"""What to measure at one point, checked where it is built: the one place a batch size is validated.

A ``PointPlan`` is frozen and picklable: the same object goes to the worker processes of a
``--processes`` point (see _multiproc.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from serve_bench.load._checks import check_batch_size, check_load, check_seed
from serve_bench.stats import LoadInfo, Target, point_key

__all__ = ["PointPlan"]


@dataclass(frozen=True)
class PointPlan:
    """What to measure at one grid point: target, model and signature, payload, batch size, load.

    ``InvalidValue`` (naming ``batch_size``, ``rate``, ``concurrency`` ...) when the batch size or the
    load cannot be measured; a plan that exists is valid, so nothing downstream checks them again.
    """

    target: Target
    model: str
    signature: str
    payload: str
    batch_size: int
    load: LoadInfo
    repeat: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        check_batch_size(self.batch_size)
        check_load(self.load)
        check_seed(self.seed)

    @property
    def key(self) -> str:
        return point_key(
            self.target.name, self.model, self.signature, self.payload, self.batch_size, self.load, self.repeat
        )
