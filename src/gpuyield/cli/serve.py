"""`gpuyield serve`: Prometheus metrics, /api/report and the HTML report, collections on a schedule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuyield.cli._common import err_console, errors_mapped, shown
from gpuyield.cli._grammar import DEFAULT_DB, count_option, db_option, duration_option

if TYPE_CHECKING:
    from gpuyield.serve.state import ReadWriteLock

# A schedule or a timeout of more than a year is a typo, not a setting.
_YEAR_S = 366 * 86_400


def serve_command(
    db: Annotated[Path, db_option()] = DEFAULT_DB,
    host: Annotated[
        str, typer.Option(help="Address to listen on; anything but loopback needs --token-file.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 9464,
    collect_every: Annotated[
        float | None,
        duration_option(
            "--collect-every",
            help="Run `gpuyield collect` this often; without it, serve re-reads the store "
            "whenever something else (an ingest from cron) changes it.",
            at_least_s=1,
            at_most_s=_YEAR_S,
            example="5m",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file", help="Bearer token clients on other machines must send (one line)."
        ),
    ] = None,
    top_accounts: Annotated[
        int,
        count_option(
            "--top-accounts",
            help="Accounts exported one by one; the rest as (others).",
            at_least=1,
            example="50",
        ),
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
        int,
        count_option(
            "--max-connections", help="Open connections kept at most.", at_least=1, example="256"
        ),
    ] = 256,
    header_timeout: Annotated[
        float,
        duration_option(
            "--header-timeout",
            help="Time a new connection has to send its whole request head.",
            at_least_s=0.001,
            at_most_s=_YEAR_S,
            example="10s",
            show_default="10s",
        ),
    ] = 10.0,
    idle_timeout: Annotated[
        float,
        duration_option(
            "--idle-timeout",
            help="Time a connection may wait after a response before its next request arrives.",
            at_least_s=0.001,
            at_most_s=_YEAR_S,
            example="30s",
            show_default="30s",
        ),
    ] = 30.0,
) -> None:
    """Serve /metrics (Prometheus), /api/report (report --json), /api/idle-now (idle-now --json)
    and / (the last 7 days as HTML)."""
    with errors_mapped():
        from gpuyield.serve import Listen, ServeSettings, check_listen, read_token, serve
        from gpuyield.serve.limits import ConnectionLimits

        listen = Listen(
            host=host,
            port=port,
            token=None if token_file is None else read_token(token_file),
            forwarded_allow_ips=forwarded_allow_ips,
            limits=ConnectionLimits(
                max_connections=max_connections,
                header_timeout_s=header_timeout,
                idle_timeout_s=idle_timeout,
            ),
        )
        check_listen(listen)
        settings = ServeSettings(
            db=db,
            collect_fn=None if collect_every is None else scheduled_collect(db),
            collect_every_s=collect_every,
            top_accounts=top_accounts,
        )
        err_console.print(
            f"gpuyield serve: http://{shown(host)}:{port}/  (metrics at /metrics; Ctrl-C stops)",
            highlight=False,
        )
        serve(settings, listen)


def scheduled_collect(db: Path) -> Callable[[ReadWriteLock], object]:
    """``gpuyield collect`` into ``db`` (from the store's watermark, as the CLI's), imported only
    when a schedule asks for it: it runs Slurm's commands, which a plain server never needs. It
    holds the server's store lock for writing only while it writes the store."""
    from gpuyield.ingest.collect import collect

    def run(lock: ReadWriteLock) -> object:
        return collect(db, store_lock=lock)

    return run
