"""serve-bench command line: a table of small subcommands over the library.

Each subcommand parses its flags and calls one library function. User mistakes
raise ``UserError`` and end as one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from serve_bench.errors import UserError

__all__ = ["main"]

Command = Callable[[argparse.Namespace], int]
_COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Command, str]] = {}


def command(name: str, help: str) -> Callable[[Callable[[argparse.ArgumentParser], None]], Callable[[Command], Command]]:
    def register_args(add_args: Callable[[argparse.ArgumentParser], None]) -> Callable[[Command], Command]:
        def register_run(run: Command) -> Command:
            _COMMANDS[name] = (add_args, run, help)
            return run

        return register_run

    return register_args


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other user error
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# --- export -----------------------------------------------------------------


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="catalogue name: inception_v3, resnet50, mobilenet_v2, tiny")
    p.add_argument("--list", action="store_true", help="list the catalogue with sizes, parameters and GFLOPs")
    p.add_argument("--weights", default="imagenet", help="imagenet (needs network), random, or a Keras weights file")
    p.add_argument("--version", type=int, default=None, help="version number (default: next free)")
    p.add_argument("--out", default="exported_models", help="models directory (default: exported_models/)")
    p.add_argument("--warmup-batch-sizes", default="1,8,32", help="one warm-up record per size (default 1,8,32)")
    p.add_argument("--force", action="store_true", help="replace an existing version")


@command("export", "export a catalogue model as a SavedModel in TF Serving's layout")(_export_args)
def _export(args: argparse.Namespace) -> int:
    from serve_bench import export

    if args.list:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="serve-bench model catalogue (counted from each graph)")
        for column in ("model", "input", "output", "parameters", "GFLOPs/image", "description"):
            table.add_column(column, justify="right" if column in ("parameters", "GFLOPs/image") else "left")
        for name, spec in export.CATALOGUE.items():
            facts = export.model_facts(name)
            h, w, c = facts.input_shape
            table.add_row(name, f"{h}x{w}x{c}", str(facts.feature_size), f"{facts.parameters:,}",
                          f"{facts.flops_per_image / 1e9:.3f}", spec.description)
        Console().print(table)
        return 0
    if not args.model:
        raise UserError(f"name a model to export ({', '.join(export.CATALOGUE)}) or pass --list")
    export.get_spec(args.model)  # fail on a bad name before TensorFlow starts
    sizes = export.parse_batch_sizes(args.warmup_batch_sizes)
    result = export.export_model(
        args.model, weights=args.weights, version=args.version, out=args.out,
        warmup_batch_sizes=sizes, force=args.force,
    )
    facts = result.facts
    h, w, c = facts.input_shape
    print(f"exported {facts.model} version {result.version} to {result.path}")
    print(f"  serving_default: images float32 [-1, {h}, {w}, {c}] (pixels 0-255) -> features float32 [-1, {facts.feature_size}]")
    print(f"  serving_bytes:   image_bytes string [-1] (JPEG/PNG) -> features float32 [-1, {facts.feature_size}]")
    print(f"  parameters {facts.parameters:,}; {facts.flops_per_image / 1e9:.3f} GFLOPs per image; "
          f"warm-up batch sizes {','.join(map(str, sizes))}")
    if facts.weights == "random":
        print("  weights: random (timing does not depend on weight values; the features mean nothing)")
    else:
        print(f"  weights: {facts.weights}")
    print(f"  models.config: {result.models_config}")
    return 0


# --- entry point ------------------------------------------------------------


def _load_commands() -> None:
    # Commands defined in other modules register themselves on import.
    from serve_bench import _cli_commands  # noqa: F401


def build_parser() -> argparse.ArgumentParser:
    _load_commands()
    parser = _Parser(prog="serve-bench", description=__doc__.splitlines()[0] if __doc__ else None)
    from serve_bench import __version__

    parser.add_argument("--version", action="version", version=f"serve-bench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (add_args, _, help_text) in _COMMANDS.items():
        add_args(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _, run, _ = _COMMANDS[args.command]
    try:
        return run(args)
    except UserError as exc:
        print(f"serve-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"serve-bench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run through the imported module so subcommands register in one table.
    from serve_bench.cli import main as _main

    sys.exit(_main())
