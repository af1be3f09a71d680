"""The video-frame benchmark: decode a video, stream its frames through a served model, measure frames/s.

    outcome = asyncio.run(run_pipeline(PipelineConfig(Path("clip.mp4"), "grpc://localhost:8500", "inception_v3")))
    print(outcome.answer)  # "batching 16 frames per request: N fps vs M fps unbatched (×R); the … is the limit"

`serve-bench pipeline` is ``add_pipeline_arguments`` (its own flags; the shared ones are the CLI's,
``_cli_args.pipeline_args``) + ``run_pipeline_command``. Importing this
package imports neither TensorFlow nor the server; the in-process comparison imports
TensorFlow when it runs, if it is installed.
"""

from serve_bench.pipeline._cli import add_pipeline_arguments, config_from_args, print_summary, run_pipeline_command
from serve_bench.pipeline._run import PipelineConfig, PipelineOutcome, run_pipeline, video_features
from serve_bench.pipeline._stream import StreamRun, run_stream
from serve_bench.pipeline._verdict import LIMITS, batching_answer, limit_of

__all__ = [
    "LIMITS",
    "PipelineConfig",
    "PipelineOutcome",
    "StreamRun",
    "add_pipeline_arguments",
    "batching_answer",
    "config_from_args",
    "limit_of",
    "print_summary",
    "run_pipeline",
    "run_pipeline_command",
    "run_stream",
    "video_features",
]
