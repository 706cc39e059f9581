"""Why an input path cannot be read, said precisely (not "no such file" for everything)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuyield.errors import InputError, ParseError

#: A Slurm ingest given no file: the fields (the CLI says --sacct, --events, --nodes or --dir).
NO_SLURM_INPUT_HINT = "give ingest.sacct, ingest.events, ingest.nodes or SlurmInputs.from_dir"


def check_input_file(path: Path, *, field: str) -> None:
    """Raise an InputError naming what ``path`` is when it is not a regular, readable file.

    A directory, a device such as ``/dev/zero`` (which never ends), a FIFO, a symlink loop and a
    missing file each get their own message; ``field`` names the input that named the path
    (``ingest.sacct``: the CLI says ``--sacct``).
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(
                f"{path}: a symbolic link to a file that does not exist",
                hint=f"check the {field} path",
            ) from None
        raise InputError(f"{path}: no such file", hint=f"check the {field} path") from None
    except OSError as error:  # a symlink loop, a path through something that is not a directory
        raise InputError(
            f"{path}: cannot be opened: {error.strerror or error}", hint=f"check the {field} path"
        ) from None
    if stat.S_ISDIR(mode):
        raise InputError(
            f"{path}: is a directory, not a file",
            hint=f"give {field} a file (or SlurmInputs.from_dir for a directory of captures)",
        )
    if not stat.S_ISREG(mode):
        raise InputError(
            f"{path}: is not a regular file (a device, pipe or socket)",
            hint=f"save the output to a file and give {field} that file",
        )
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied", hint="check the file's permissions")


# DuckDB's CSV reader refuses a line longer than this (its max_line_size default).
MAX_LINE_BYTES = 2_000_000


def long_line_error(paths: list[Path], error: Exception) -> Exception:
    """The error to raise for a DuckDB error while reading ``paths``: a ParseError naming the file
    and line when the reader refused a line longer than ``MAX_LINE_BYTES``, else ``error``."""
    if "Maximum line size" not in str(error):
        return error
    for path in paths:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if len(line) > MAX_LINE_BYTES:
                    return ParseError(
                        f"line of {len(line):,} bytes, more than {MAX_LINE_BYTES:,}",
                        path=path,
                        line=number,
                        hint="no accounting field is this long; check the file is what the "
                        "command printed (a field over 2 MB is refused, not cut)",
                    )
    return error
