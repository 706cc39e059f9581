"""`gpuyield serve`: Prometheus metrics, /api/report and the HTML report, collections on a schedule."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuyield.cli._common import err_console, errors_mapped, shown
from gpuyield.errors import InputError

if TYPE_CHECKING:
    from gpuyield.serve.state import ReadWriteLock

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(s|m|h|d)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def serve_command(
    db: Annotated[
        Path, typer.Option("--db", help="DuckDB store (written by `gpuyield ingest`/`collect`).")
    ] = Path("gpuyield.duckdb"),
    host: Annotated[
        str, typer.Option(help="Address to listen on; anything but loopback needs --token-file.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 9464,
    collect_every: Annotated[
        str | None,
        typer.Option(
            "--collect-every",
            help="Run `gpuyield collect` this often (30s, 5m, 1h); without it, serve re-reads "
            "the store whenever something else (an ingest from cron) changes it.",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file", help="Bearer token clients on other machines must send (one line)."
        ),
    ] = None,
    top_accounts: Annotated[
        int, typer.Option(help="Accounts exported one by one; the rest as (others).")
    ] = 50,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            "--forwarded-allow-ips",
            help="Proxies whose X-Forwarded-For is believed (comma-separated addresses or "
            "networks, or '*'); without it proxy headers are ignored, whatever "
            "FORWARDED_ALLOW_IPS says. They never stand in for the token.",
        ),
    ] = None,
    max_connections: Annotated[
        int, typer.Option("--max-connections", help="Open connections kept at most.")
    ] = 256,
    header_timeout: Annotated[
        str,
        typer.Option(
            "--header-timeout", help="Time a new connection has to send its whole request head."
        ),
    ] = "10s",
    idle_timeout: Annotated[
        str,
        typer.Option(
            "--idle-timeout",
            help="Time a connection may wait after a response before its next request arrives.",
        ),
    ] = "30s",
) -> None:
    """Serve /metrics (Prometheus), /api/report (report --json), /api/idle-now (idle-now --json)
    and / (the last 7 days as HTML)."""
    with errors_mapped():
        from gpuyield.serve import Listen, ServeSettings, check_listen, read_token, serve
        from gpuyield.serve.limits import ConnectionLimits

        every_s = None if collect_every is None else parse_duration(collect_every)
        listen = Listen(
            host=host,
            port=port,
            token=None if token_file is None else read_token(token_file),
            forwarded_allow_ips=forwarded_allow_ips,
            limits=ConnectionLimits(
                max_connections=max_connections,
                header_timeout_s=parse_duration(header_timeout, "--header-timeout"),
                idle_timeout_s=parse_duration(idle_timeout, "--idle-timeout"),
            ),
        )
        check_listen(listen)
        if top_accounts < 1:
            raise InputError(
                f"--top-accounts must be 1 or more, not {top_accounts}", hint="e.g. 50"
            )
        settings = ServeSettings(
            db=db,
            collect_fn=None if every_s is None else scheduled_collect(db),
            collect_every_s=every_s,
            top_accounts=top_accounts,
        )
        err_console.print(
            f"gpuyield serve: http://{shown(host)}:{port}/  (metrics at /metrics; Ctrl-C stops)",
            highlight=False,
        )
        serve(settings, listen)


def parse_duration(text: str, flag: str = "--collect-every") -> float:
    """``30s``, ``5m``, ``1h``, ``1d`` as seconds."""
    match = _DURATION.fullmatch(text.strip()) if len(text) <= 32 else None
    seconds = 0.0 if match is None else float(match.group(1)) * _UNIT_S[match.group(2)]
    # At most a year: 1e300s (or more digits than a float holds) is a typo, not a schedule.
    if not 0 < seconds <= 366 * 86_400:
        raise InputError(
            f"{flag}: not a duration from 1s to 366d: {text[:32]!r}",
            hint="write it like 30s, 5m, 1h or 1d",
        )
    return seconds


def scheduled_collect(db: Path) -> Callable[[ReadWriteLock], object]:
    """``gpuyield collect`` into ``db`` (from the store's watermark, as the CLI's), imported only
    when a schedule asks for it: it runs Slurm's commands, which a plain server never needs. It
    holds the server's store lock for writing only while it writes the store."""
    from gpuyield.ingest.collect import collect

    def run(lock: ReadWriteLock) -> object:
        return collect(db, store_lock=lock)

    return run
