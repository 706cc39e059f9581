"""Regenerate every figure of the docs from the commands printed beside it.

A figure is a region of a page (README.md, docs/*.md) between two markers::

    <!-- figure: NAME [markdown] [setup=SETUP] [fails] -->
    ```console
    $ gpuyield ...
    (the output, written here)
    ```
    <!-- /figure -->

Each ``$`` line (continued with a trailing backslash) is a shell command. The script runs the
region's commands in order, in a fresh directory prepared by ``SETUP``, and writes what they
printed (stdout and stderr together, as a terminal shows them) under each command. With
``markdown`` the commands stay alone in the block and the output follows it as Markdown (tables
that render). ``fails`` allows a command to exit non-zero (an error message is the figure).

    python docs/figures.py            # rewrite every figure (make docs-figures)
    python docs/figures.py --check    # exit 1 naming each figure that is not current
    python docs/figures.py --only NAME [--only NAME ...] [--check]
    python docs/figures.py --list

Commands run as a reader would run them: ``gpuyield`` and ``python`` are this interpreter's (the
project's virtual environment), ``jq`` a stand-in for the forms the docs use (``.a.b[0]``,
``-c '{a, b}'`` and ``-c '.a[0] | {b, c}'``) that prints as jq 1.7 does (1.6 drops the ``.0`` of
a whole float), with ``COLUMNS=100``, ``TZ=UTC``, ``NO_COLOR=1`` and no terminal. Lines lose
their trailing spaces (Rich pads table titles); nothing else is changed.

Setups (each in a fresh temporary directory):

* ``empty`` (default): nothing.
* ``sample``: the bundled Slurm sample (``examples/slurm-lab/``) under the names the README's
  session uses: ``sacct.psv``, ``events.psv``, ``nodes.txt``, ``manifest.toml``.
* ``sample-db``: ``sample``, ingested into ``gpuyield.duckdb`` exactly as the README's first
  command does (``--since 2026-11-30T10:00:00 --until 2026-11-30T11:00:00``).
* ``ladder-lab``: the real Slurm lab's ladder capture (``examples/ladder/lab-capture/``),
  ingested into ``ladder.duckdb`` with its ``--until``.
* ``guard-example``: ``examples/guard/spike_run.py``, the stand-in training script.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
SAMPLE = REPO / "examples" / "slurm-lab"
LADDER_CAPTURE = REPO / "examples" / "ladder" / "lab-capture"
COMMAND_TIMEOUT_S = 600

_REGION = re.compile(
    r"^<!-- figure: (?P<head>[^>]*?) -->\n(?P<body>.*?)^<!-- /figure -->$", re.S | re.M
)
_FENCE = re.compile(r"\A```console\n(?P<inner>.*?)^```\n", re.S | re.M)
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
_OPTIONS = ("markdown", "fails")


class FigureError(Exception):
    """A figure that cannot be read or run: the message names the page and the figure."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure:
    """One figure region of a page."""

    name: str
    page: Path
    #: Offsets of the region's body (between the markers) in the page's text.
    start: int
    end: int
    body: str
    #: Each command as written: its lines, continuation lines included.
    commands: tuple[tuple[str, ...], ...]
    markdown: bool
    fails: bool
    setup: str

    @property
    def where(self) -> str:
        line = self.page.read_text(encoding="utf-8").count("\n", 0, self.start)
        page = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page
        return f"{page}:{line} (figure {self.name})"


def _parse_head(head: str, page: Path) -> tuple[str, set[str], str]:
    words = head.split()
    if not words or not _NAME.fullmatch(words[0]):
        raise FigureError(f"{page.name}: figure marker {head!r} needs a name like estimate-train")
    options, setup = set(), "empty"
    for word in words[1:]:
        if word.startswith("setup="):
            setup = word.removeprefix("setup=")
        elif word in _OPTIONS:
            options.add(word)
        else:
            raise FigureError(f"{page.name}: figure {words[0]}: unknown option {word!r}")
    if setup not in SETUPS:
        raise FigureError(f"{page.name}: figure {words[0]}: unknown setup {setup!r}")
    return words[0], options, setup


def _commands(inner: str) -> tuple[tuple[str, ...], ...]:
    """The ``$`` commands of a console block, each with its continuation lines."""
    found: list[tuple[str, ...]] = []
    lines = inner.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = [lines[i]]
        while command[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        found.append(tuple(command))
        i += 1
    return tuple(found)


def figures(pages: tuple[Path, ...] = PAGES) -> list[Figure]:
    """Every figure of the pages, in page order; names are unique across the docs."""
    found: list[Figure] = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in _REGION.finditer(text):
            name, options, setup = _parse_head(match.group("head"), page)
            fence = _FENCE.match(match.group("body"))
            if fence is None:
                raise FigureError(f"{page.name}: figure {name} must start with a console block")
            commands = _commands(fence.group("inner"))
            if not commands:
                raise FigureError(f"{page.name}: figure {name} has no $ command")
            found.append(
                Figure(
                    name=name,
                    page=page,
                    start=match.start("body"),
                    end=match.end("body"),
                    body=match.group("body"),
                    commands=commands,
                    markdown="markdown" in options,
                    fails="fails" in options,
                    setup=setup,
                )
            )
    names = [f.name for f in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FigureError(f"figure names used twice: {', '.join(twice)}")
    return found


# ---- running


def _shell_text(command: tuple[str, ...]) -> str:
    """The command as the shell reads it: ``$ `` dropped, continuations joined."""
    first, *rest = command
    return "\n".join([first.removeprefix("$ "), *rest])


_GPUYIELD_SHIM = '#!/bin/sh\nexec "{python}" -m gpuyield "$@"\n'
_JQ_SHIM = '#!/bin/sh\nexec "{python}" "{script}" --jq "$@"\n'
_PYTHON_SHIM = '#!/bin/sh\nexec "{python}" "$@"\n'


def _environment(shims: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUYIELD_", "COLUMNS"))}
    env.update(
        PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="100",
        LINES="50",
        TZ="UTC",
        NO_COLOR="1",
        TERM="dumb",
        PYTHONHASHSEED="0",
        LC_ALL="C.UTF-8",
    )
    return env


def _make_shims(directory: Path) -> Path:
    shims = directory / ".bin"
    shims.mkdir()
    for name, text in (("gpuyield", _GPUYIELD_SHIM), ("jq", _JQ_SHIM), ("python", _PYTHON_SHIM)):
        path = shims / name
        path.write_text(text.format(python=sys.executable, script=Path(__file__).resolve()))
        path.chmod(0o755)
    return shims


def _run(command: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    return proc.returncode, proc.stdout


def _clean(output: str) -> list[str]:
    lines = [line.rstrip() for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def render(figure: Figure) -> str:
    """The region's body as the commands print it now."""
    with tempfile.TemporaryDirectory(prefix=f"figure-{figure.name}-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        env = _environment(_make_shims(Path(tmp)))
        SETUPS[figure.setup](work, env)
        outputs: list[list[str]] = []
        for command in figure.commands:
            code, out = _run(_shell_text(command), work, env)
            if code and not figure.fails:
                raise FigureError(
                    f"{figure.where}: `{_shell_text(command)}` exited {code} (add `fails` to "
                    f"the marker if the error is the figure):\n{out}"
                )
            outputs.append(_clean(out))
    if figure.markdown:
        block = [line for command in figure.commands for line in command]
        # Each command's output is a paragraph (a table, a list) of its own.
        shown = "\n\n".join("\n".join(out) for out in outputs if out)
        return "```console\n" + "\n".join(block) + "\n```\n\n" + shown + "\n"
    lines: list[str] = []
    for command, shown_lines in zip(figure.commands, outputs, strict=True):
        lines += [*command, *shown_lines]
    return "```console\n" + "\n".join(lines) + "\n```\n"


# ---- setups


def _setup_empty(work: Path, env: dict[str, str]) -> None:
    """Nothing: the figure's own commands make what they need."""


SAMPLE_AS = {
    "sacct-X-D-wide.psv": "sacct.psv",
    "sacctmgr-event-format.psv": "events.psv",
    "scontrol-show-nodes-oneliner.txt": "nodes.txt",
    "manifest.toml": "manifest.toml",
}
SAMPLE_INGEST = (
    "gpuyield ingest slurm --sacct sacct.psv --events events.psv --nodes nodes.txt "
    "--manifest manifest.toml --since 2026-11-30T10:00:00 --until 2026-11-30T11:00:00"
)


def _setup_sample(work: Path, env: dict[str, str]) -> None:
    for name, as_name in SAMPLE_AS.items():
        shutil.copy(SAMPLE / name, work / as_name)


def _setup_sample_db(work: Path, env: dict[str, str]) -> None:
    _setup_sample(work, env)
    _checked(SAMPLE_INGEST, work, env)


def _setup_guard_example(work: Path, env: dict[str, str]) -> None:
    shutil.copy(REPO / "examples" / "guard" / "spike_run.py", work / "spike_run.py")


def _setup_ladder_lab(work: Path, env: dict[str, str]) -> None:
    for path in LADDER_CAPTURE.iterdir():
        shutil.copy(path, work / path.name)
    until = (LADDER_CAPTURE / "until.txt").read_text(encoding="utf-8").strip()
    _checked(
        "gpuyield ingest slurm --db ladder.duckdb --sacct sacct.psv --events events.psv "
        f"--nodes nodes.txt --manifest manifest.toml --until {until}",
        work,
        env,
    )


def _checked(command: str, work: Path, env: dict[str, str]) -> None:
    code, out = _run(command, work, env)
    if code:
        raise FigureError(f"setup command `{command}` exited {code}:\n{out}")


SETUPS: dict[str, Callable[[Path, dict[str, str]], None]] = {
    "empty": _setup_empty,
    "sample": _setup_sample,
    "sample-db": _setup_sample_db,
    "ladder-lab": _setup_ladder_lab,
    "guard-example": _setup_guard_example,
}


# ---- jq stand-in


def jq(argv: list[str], stdin: str) -> str:
    """``jq PATH``, ``jq -c '{a, b}'`` and ``jq -c 'PATH | {a, b}'`` on one JSON document, printed
    as jq 1.7 prints them (numbers as they were written)."""
    import json

    compact = argv[:1] == ["-c"]
    program = argv[-1] if argv else "."
    data = json.loads(stdin)
    for stage in program.split("|"):  # a path, an object of keys, or a path | an object
        stage = stage.strip()
        if stage.startswith("{"):
            data = {key.strip(): data[key.strip()] for key in stage.strip("{}").split(",")}
            continue
        for key, index in re.findall(r"\.(\w+)|\[(\d+)\]", stage):
            data = data[key] if key else data[int(index)]
    if compact:
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(data, indent=2, ensure_ascii=False)


# ---- command line


def _diff(figure: Figure, now: str) -> str:
    lines = difflib.unified_diff(
        figure.body.splitlines(), now.splitlines(), "in the page", "now", lineterm="", n=1
    )
    return "\n".join(list(lines)[:40])


def regenerate(chosen: list[Figure], *, check: bool) -> int:
    """Render each figure; rewrite the pages (or, with ``check``, report stale figures)."""
    stale: list[tuple[Figure, str]] = []
    by_page: dict[Path, list[tuple[Figure, str]]] = {}
    for figure in chosen:
        began = time.perf_counter()
        now = render(figure)
        took = time.perf_counter() - began
        state = "current" if now == figure.body else "stale" if check else "rewritten"
        print(f"{figure.where}: {state} ({took:.1f} s)", file=sys.stderr)
        if now != figure.body:
            stale.append((figure, now))
            by_page.setdefault(figure.page, []).append((figure, now))
    if check:
        for figure, now in stale:
            print(f"\n{figure.where} is stale:\n{_diff(figure, now)}", file=sys.stderr)
        return 1 if stale else 0
    for page, changes in by_page.items():
        text = page.read_text(encoding="utf-8")
        for figure, now in sorted(changes, key=lambda c: c[0].start, reverse=True):
            text = text[: figure.start] + now + text[figure.end :]
        page.write_text(text, encoding="utf-8")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--jq"]:
        print(jq(argv[1:], sys.stdin.read()))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a figure is stale")
    parser.add_argument("--only", action="append", default=[], help="this figure only")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args(argv)
    try:
        found = figures()
        unknown = sorted(set(args.only) - {f.name for f in found})
        if unknown:
            raise FigureError(f"no figure named {', '.join(unknown)}")
        if args.list:
            for f in found:
                print(f"{f.name}\t{f.page.relative_to(REPO)}\tsetup={f.setup}")
            return 0
        chosen = [f for f in found if not args.only or f.name in args.only]
        return regenerate(chosen, check=args.check)
    except FigureError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
