"""Subcommands beyond export; each registers itself with the table in cli.py."""

from __future__ import annotations

import argparse

from serve_bench.cli import command

# --- demo -------------------------------------------------------------------


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="exported_models", help="models directory")


@command("demo", "the README's first command: export, serve, sweep, report")(_demo_args)
def _demo(args: argparse.Namespace) -> int:
    from serve_bench.demo import run_demo

    return run_demo(args)
