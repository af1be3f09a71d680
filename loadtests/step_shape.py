"""A step load shape: one Locust run walks a list of user counts (a concurrency sweep).

    locust -f loadtests/locustfile.py,loadtests/step_shape.py --headless --steps 1,2,4,8 --step-seconds 30

Each step holds its user count for --step-seconds; `serve-bench import-locust`
turns each step of the stats history into one point.
"""

from __future__ import annotations

import sys
from pathlib import Path

from locust import LoadTestShape, events

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: loadtests._payloads
from loadtests._payloads import parse_steps


@events.init_command_line_parser.add_listener
def _arguments(parser) -> None:  # type: ignore[no-untyped-def]
    group = parser
    group.add_argument("--steps", default="1,2,4,8", include_in_web_ui=True, help="user counts, in order")
    group.add_argument(
        "--step-seconds", type=float, default=30.0, include_in_web_ui=True, help="how long each step holds"
    )


class StepLoadShape(LoadTestShape):
    def tick(self):  # type: ignore[no-untyped-def]
        options = self.runner.environment.parsed_options if self.runner else None
        steps = parse_steps(options.steps if options else "1")  # checked at init (locustfile.py's _check_memory)
        seconds = options.step_seconds if options else 30.0
        index = int(self.get_run_time() // seconds)
        if index >= len(steps):
            return None  # done: Locust stops the run
        users = steps[index]
        return users, users  # spawn the whole step at once
