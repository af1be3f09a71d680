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


# --- serve ------------------------------------------------------------------


def _serve_args(p: argparse.ArgumentParser) -> None:
    from serve_bench.server import build_arg_parser

    build_arg_parser(p)


@command("serve", "run the local TF-Serving-compatible server (gRPC + REST)")(_serve_args)
def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from serve_bench.server import LocalServer, config_from_args

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    server = LocalServer(config_from_args(args))
    asyncio.run(server.serve_forever())
    return 0
