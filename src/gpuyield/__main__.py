"""``python -m gpuyield`` and the ``gpuyield`` console script.

``gpuyield preflight`` runs at every ``sbatch`` (a job_submit hook, a prolog): a well-formed one is
answered here, without importing the CLI's libraries (typer, pydantic, rich) or DuckDB's Python
layer; ``bench/preflight.py`` measures it. Everything else, and any preflight this path does not
answer (``--help``, an option it does not know, a value that does not parse, an error), goes to the
full CLI, which reads it with the same grammar and prints it as every command does.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

# preflight's options and how each is read; tests/cli/test_preflight_path.py holds this table to
# the CLI's own (names, types, defaults).
PREFLIGHT_OPTIONS = {
    "--gpus": "COUNT",
    "--family": "TEXT",
    "--run": "TEXT",
    "--db": "PATH",
    "--at": "TIME",
    "--tz": "ZONE",
    "--json": "FLAG",
}
PREFLIGHT_DEFAULTS = {"--db": "gpuyield.duckdb", "--tz": "UTC"}


def _options(argv: list[str]) -> dict[str, str] | None:
    """``--name value``, ``--name=value`` and flags, as click reads them; None for anything else."""
    given: dict[str, str] = {}
    words = iter(argv)
    for word in words:
        name, eq, value = word.partition("=")
        kind = PREFLIGHT_OPTIONS.get(name)
        if kind is None or (kind == "FLAG" and eq):
            return None
        if kind != "FLAG" and not eq:
            value = next(words, "-")
        if kind != "FLAG" and value.startswith("-"):
            return None  # a missing value, or an option where one should be: click says which
        given[name] = value if kind != "FLAG" else "1"
    return given


@dataclass(frozen=True, kw_only=True, slots=True)
class _Check:
    """What preflight asks ``check_launch`` (the time zone only read ``--at``)."""

    gpus: int
    family: str | None
    run: str | None
    db: str
    at_s: int | None


def _checked(given: dict[str, str]) -> _Check | None:
    """The check's arguments, or None when the full CLI must say what is wrong."""
    from gpuyield import parsing
    from gpuyield.errors import FieldError

    if "--gpus" not in given or ("--family" in given) == ("--run" in given):
        return None
    tz = given.get("--tz", PREFLIGHT_DEFAULTS["--tz"])
    try:
        gpus = parsing.parse_count(given["--gpus"], field="--gpus", at_least=1)
        at_s = (
            parsing.parse_instant(given["--at"], tz=tz, field="--at") if "--at" in given else None
        )
        parsing.check_zone(tz, field="--tz")
        return _Check(
            gpus=gpus,
            family=given.get("--family"),
            run=given.get("--run"),
            db=given.get("--db", PREFLIGHT_DEFAULTS["--db"]),
            at_s=at_s,
        )
    except FieldError:
        return None


def preflight(argv: list[str]) -> int | None:
    """Answer ``gpuyield preflight ARGV``: its exit status, or None to leave it to the full CLI."""
    given = _options(argv)
    arguments = None if given is None else _checked(given)
    if given is None or arguments is None:
        return None
    from gpuyield.errors import GpuyieldError
    from gpuyield.launch import check_launch

    try:
        answer = check_launch(
            arguments.db,
            gpus=arguments.gpus,
            family=arguments.family,
            run=arguments.run,
            at_s=arguments.at_s,
        )
    except GpuyieldError:
        return None  # the full CLI runs it again and prints the error with its hint
    printed = answer.printed(as_json="--json" in given)
    sys.stdout.write(printed.stdout)
    sys.stderr.write(printed.stderr)
    return 0 if answer.allowed else 3


def main() -> None:
    """Entry point of the ``gpuyield`` console script."""
    if sys.argv[1:2] == ["preflight"]:
        status = preflight(sys.argv[2:])
        if status is not None:
            sys.stdout.flush()
            raise SystemExit(status)
    from gpuyield.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
