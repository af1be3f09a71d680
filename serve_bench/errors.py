"""Errors that mean "the user asked for something that cannot be done".

The CLI prints these as one line and exits with status 2; they never carry a
traceback. Errors talking to a server live in ``serve_bench.client``.
"""


class UserError(Exception):
    """Bad input from the user: the message names the problem and what to do."""
