"""qsim's command line (the only module that reads argv).

The global options (--version, --max-tensor-bytes, --max-memory, --threads) are declared here; each command
is a module of qsim.commands that declares its arguments and runs. Path arguments are checked
before any command runs. A QsimError is printed as a message (exit 2); any other exception is
an internal error (a traceback, exit 1). When the reader of stdout goes away (`qsim check M |
head -1`), qsim ends quietly with exit 141, as a Unix tool killed by SIGPIPE does in the shell
(128 + 13). SIGPIPE itself keeps Python's setting (ignored): with the default action, a
closed socket of a Dask worker or client would kill the process.
"""
from __future__ import annotations

import argparse
import os
import select
import sys

from . import limits, threads
from .errors import QsimError, UsageError
from .version import __version__


def commands() -> tuple:
    """The command modules in `qsim --help` order; each has NAME, HELP, add_arguments(parser) and
    run(args) -> exit code."""
    # The commands load the compiled kernels when imported: a missing or stale build raises
    # KernelsUnavailableError, which main reports (exit 2, with the rebuild hint) instead of a
    # traceback at `import qsim.cli`.
    from .commands import (check, explore, export_rtl,  # deferred: see the comment above
                           export_vectors, quantize, run, selftest, simulate)
    return (selftest, run, quantize, export_rtl, simulate, explore, export_vectors, check)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qsim",
        description="Bit-exact integer quantization of NNEF models (TOSA 0.30, CVM), "
                    "with Cython kernels and a cycle-simulated systolic-array NPU.")
    parser.add_argument("--version", action="version", version=f"qsim {__version__}")
    parser.add_argument("--max-tensor-bytes", metavar="SIZE",
                        help="refuse any single tensor, constant or container member larger than "
                             "SIZE bytes (K/M/G/T suffixes; default 4G, or $QSIM_MAX_TENSOR_BYTES)")
    parser.add_argument("--max-memory", metavar="SIZE",
                        help="refuse work that would hold more than SIZE bytes at once: constants "
                             "folded at import, tensors live in a run, decoded images (K/M/G/T; "
                             "default half of the memory qsim may use, or $QSIM_MAX_MEMORY)")
    parser.add_argument("--threads", metavar="N",
                        help="compute on N threads (float BLAS and integer kernels; results are "
                             "the same for any N; default all cores, or $QSIM_THREADS)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in commands():
        command_parser = sub.add_parser(command.NAME, help=command.HELP)
        command.add_arguments(command_parser)
        command_parser.set_defaults(handler=command.run)
    return parser


# Options whose values name files or folders (an --input may be NAME=PATH).
PATH_OPTIONS = ("model", "calib", "eval", "out", "input", "output", "dump", "config", "tech", "vcd",
                "cocotb")
NAME_MAX_BYTES, PATH_MAX_BYTES = 255, 4095     # Linux limits on one component and a whole path


def check_path_arguments(args: argparse.Namespace) -> None:
    """Refuses a path the operating system cannot name (a component over 255 bytes, a path over
    4095, a NUL byte) before any command uses it, so no file call fails deep inside a stage."""
    for option in PATH_OPTIONS:
        values = getattr(args, option, None)
        for value in values if isinstance(values, list) else [values]:
            if not isinstance(value, str):
                continue
            path = value.partition("=")[2] if option == "input" and "=" in value else value
            raw = os.fsencode(path)
            flag = "MODEL" if option == "model" else f"--{option}"
            shown = path if len(path) <= 60 else path[:60] + "..."
            if b"\0" in raw or len(raw) > PATH_MAX_BYTES or \
                    any(len(part) > NAME_MAX_BYTES for part in raw.split(b"/")):
                raise UsageError(f"{flag} {shown!r} is not a path this system can open (a name over "
                                 f"{NAME_MAX_BYTES} bytes, a path over {PATH_MAX_BYTES}, or a NUL byte)",
                                 hint="give a shorter path")


EXIT_BROKEN_PIPE = 128 + 13      # the shell's status of a process killed by SIGPIPE


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            return _main(argv)
        finally:
            if sys.stdout is not None:  # flushed here, not at exit, where a closed pipe cannot be handled
                sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise                       # another pipe (a subprocess's): an internal error
        # the rest of the output goes nowhere, also at the interpreter's final flush
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reading end is closed (poll reports an error
    or hang-up on the writing end)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _main(argv: list[str] | None) -> int:
    try:
        parser = build_parser()
    except QsimError as err:        # e.g. a broken kernel build, found while the commands import
        print(f"qsim: {err.format()}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        print("qsim: usage error: no command given\n  hint: qsim quantize runs the main job on the "
              "embedded model; qsim COMMAND --help explains a command", file=sys.stderr)
        return 2
    # --max-tensor-bytes and --max-memory hold for this run (and the worker processes it starts) only
    size_options = (("--max-tensor-bytes", args.max_tensor_bytes, limits.MAX_TENSOR_BYTES_ENV),
                    ("--max-memory", args.max_memory, limits.MAX_MEMORY_ENV))
    previous = {env: os.environ.get(env) for _, _, env in size_options}
    try:
        for flag, value, env in size_options:
            if value is not None:
                limits.parse_byte_size(value, flag)
                os.environ[env] = value
        if args.threads is not None:
            threads.set_threads(args.threads)
        check_path_arguments(args)
        return int(args.handler(args) or 0)
    except QsimError as err:
        print(f"qsim: {err.format()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("qsim: interrupted", file=sys.stderr)
        return 130
    finally:
        for env, value in previous.items():
            if value is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = value


if __name__ == "__main__":
    sys.exit(main())
