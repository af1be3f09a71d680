"""serve-bench command line: one table of subcommands, each a few lines over the library.

``COMMANDS`` maps a name to its help, its flags and the function that runs it
(as pyperf's ``__main__``). User mistakes raise ``UserError`` and end as one line
on stderr with exit status 2; a library ``InvalidValue`` is reworded with the flag
the user typed.
"""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple, NoReturn

from serve_bench import _cli_args as flags
from serve_bench import _cli_commands as commands
from serve_bench.errors import InvalidValue, Terminated, UserError, interrupted_status

__all__ = ["COMMANDS", "Command", "build_parser", "main"]


class Command(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _pipeline(args: argparse.Namespace) -> int:
    from serve_bench.pipeline import run_pipeline_command

    return run_pipeline_command(args)


def _tune(args: argparse.Namespace) -> int:
    from serve_bench.tune import run_tune_command

    return run_tune_command(args)


COMMANDS: dict[str, Command] = {
    "export": Command(
        "export a catalogue model as a SavedModel in TF Serving's layout", flags.export_args, commands.export
    ),
    "serve": Command("run the local TF-Serving-compatible server (gRPC + REST)", flags.serve_args, commands.serve),
    "bench": Command(
        "measure one point (closed loop with --concurrency, open loop with --rate)", flags.bench_args, commands.bench
    ),
    "sweep": Command("measure a grid of points from a TOML spec; resumable", flags.sweep_args, commands.sweep),
    "tune": Command(
        "search TF Serving batching configurations under a latency SLO; restarts the server per configuration",
        flags.tune_args,
        _tune,
    ),
    "pipeline": Command(
        "decode a video, stream its frames through the model, measure frames/s by batch size",
        flags.pipeline_args,
        _pipeline,
    ),
    "report": Command(
        "analyse a run: terminal summary, summary.csv, plots/*.png, report.html", flags.report_args, commands.report
    ),
    "predict": Command(
        "predict latency and images/s on GPUs not at hand, from the graph's costs and published measurements",
        flags.predict_args,
        commands.predict,
    ),
    "compare": Command(
        "two runs side by side: B/A ratio of images/s and p99 per matching point", flags.compare_args, commands.compare
    ),
    "import-locust": Command(
        "turn Locust CSV output into a serve-bench run that `report` reads",
        flags.import_locust_args,
        commands.import_locust,
    ),
    "demo": Command("the README's first command: export, serve, sweep, report", flags.demo_args, commands.demo),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other user error
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _unavailable(name: str, why: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        raise UserError(f"the {name} command is not available here: {why}")

    return run


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    """The parser and, per subcommand, the function that runs it.

    A command whose optional package is missing (an ImportError while adding its
    flags) stays listed and says why when run; the others are unaffected.
    """
    from serve_bench import __version__

    parser = _Parser(prog="serve-bench", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--version", action="version", version=f"serve-bench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    runs: dict[str, Callable[[argparse.Namespace], int]] = {}
    for name, command in COMMANDS.items():
        subparser = sub.add_parser(name, help=command.help, description=command.help)
        try:
            command.add_arguments(subparser)
            flags.add_renamed(subparser, name)
            runs[name] = command.run
        except ImportError as exc:
            subparser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            runs[name] = _unavailable(name, f"{exc} (install the missing package)")
    return parser, runs


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, a command's positionals read wherever they stand: argparse gives a command's positionals
    their values all at once at the first one, so ``predict MODEL --models-dir D RUN`` left RUN unrecognized.
    Where words are left over, the command's own parser reads its words again, intermixed (unknown ones are
    still refused, in its words)."""
    words = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(words)
    if not extra:
        return args
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    own: argparse.ArgumentParser = commands.choices[args.command]
    if any(a.nargs == argparse.REMAINDER for a in own._actions):  # a command not available here takes all
        return parser.parse_args(words)
    return own.parse_intermixed_args(words[words.index(args.command) + 1 :], argparse.Namespace(command=args.command))


def main(argv: Sequence[str] | None = None) -> int:
    parser, runs = build_parser()
    args = _parse(parser, argv)
    # Python's default on SIGTERM ends the process at once, with no finally, so a launched server outlived it;
    # `serve` installs its own on its event loop (drain, then exit 0)
    # (only where SIGTERM has its default: a launcher that ignores it, or a host that handles it, keeps its own)
    previous = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    installed = previous in (signal.SIG_DFL, _on_sigterm)  # (a main() within a main() finds its own)
    if installed:
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return runs[args.command](args)
    except InvalidValue as exc:
        message = str(exc.named(flags.FLAG_OF[exc.name])) if exc.name in flags.FLAG_OF else str(exc)
        print(f"serve-bench {args.command}: error: {message}", file=sys.stderr)
        return 2
    except UserError as exc:
        flag = flags.FLAG_OF.get(exc.parameter or "")
        print(f"serve-bench {args.command}: error: {exc}" + (f" ({flag})" if flag else ""), file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:  # only a path the user typed is too long to look up; others are faults
            raise
        named = exc.filename if isinstance(exc.filename, str) else ""
        shown = named if len(named) <= 80 else f"{named[:60]}...({len(named)} characters)"
        print(
            f"serve-bench {args.command}: error: {shown}: a path too long for this filesystem to look up (a name is "
            "at most 255 bytes); give a shorter one",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt as exc:
        said = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"serve-bench {args.command}: {said}", file=sys.stderr)
        return interrupted_status(exc)
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
