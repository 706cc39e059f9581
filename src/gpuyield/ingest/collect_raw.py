"""``collect --keep-raw DIR``: each collection's output, commands and environment, kept to trace
every number back to what Slurm printed and to rebuild the store.

Everything is written inside ``DIR``: the per-collection folder's name is made of the cluster name
with anything but letters, digits, ``-`` and ``_`` replaced (a ``ClusterName`` of ``../../x`` is
Slurm's text, not a path), and the folder is checked to resolve inside ``DIR`` (a symlink planted
there is refused), so no derived path can escape it.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from gpuyield.errors import InputError
from gpuyield.times import iso_utc

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class Command(Protocol):
    """What is kept of one command (``collect.SlurmCommand``)."""

    @property
    def kind(self) -> str: ...
    @property
    def file(self) -> str: ...
    @property
    def shell(self) -> str: ...


def raw_dir(keep_raw: Path, cluster: str, end_s: int) -> Path:
    """The collection's folder inside ``keep_raw`` (created)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(end_s))
    name = f"{_UNSAFE.sub('_', cluster) or 'cluster'}-{stamp}"
    keep_raw.mkdir(parents=True, exist_ok=True)
    target = keep_raw / name
    target.mkdir(exist_ok=True)
    if not target.resolve().is_relative_to(keep_raw.resolve()) or target.is_symlink():
        raise InputError(
            f"collect.keep_raw: {target} resolves outside {keep_raw} (a symlink?)",
            hint="remove it, or give collect.keep_raw a directory only gpuyield writes",
        )
    return target


def keep(plain: Path, folder: Path, name: str) -> Path:
    """``plain`` gzip-compressed as ``folder/name.gz``, streamed (never whole in memory)."""
    target = folder / f"{name}.gz"
    with plain.open("rb") as source, gzip.GzipFile(target, "wb", compresslevel=6, mtime=0) as out:
        shutil.copyfileobj(source, out, 1 << 20)
    return target


def write_record(
    folder: Path,
    commands: Sequence[Command],
    *,
    cluster: str,
    start_s: int,
    end_s: int,
    environment: Mapping[str, str],
) -> None:
    """``commands.tsv`` (file, the exact command line with the environment that decides its
    output: ``TZ=UTC``, ``SLURM_CONF`` and the like) and ``collection.json`` with the
    ``gpuyield ingest slurm`` line that loads this collection again (the store is rebuilt by
    running those lines in order)."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(environment.items()))
    lines = [f"{c.file}.gz\t{env} {c.shell}\n" for c in commands]
    (folder / "commands.tsv").write_text("".join(lines))
    files = {c.kind: str(folder / f"{c.file}.gz") for c in commands}
    rebuild = [
        "gpuyield",
        "ingest",
        "slurm",
        "--db",
        "DB",
        "--cluster",
        cluster,
        "--since",
        iso_utc(start_s),
        "--until",
        iso_utc(end_s),
        *[a for kind, path in files.items() for a in (f"--{kind}", path)],
    ]
    record = {
        "cluster": cluster,
        "since": iso_utc(start_s),
        "until": iso_utc(end_s),
        "environment": dict(sorted(environment.items())),
        "commands": [c.shell for c in commands],
        "ingest_again": shlex.join(rebuild),
    }
    (folder / "collection.json").write_text(json.dumps(record, indent=2) + "\n")
