"""Reading utilization straight from a Prometheus server's HTTP API (``/api/v1/query_range``).

Each metric is asked for as ``last_over_time(metric[step - 1s])``: the sample scraped in each step,
and nothing once a series has ended. A plain ``metric`` query would repeat a series' last value for
the server's lookback (5 min) after it ends, counting GPUs as measured when nothing was scraped.
Long windows are asked in pieces below the server's 11,000 points per series.

Each answer is written to a file as it arrives (then read as a saved response, by DuckDB's
reader; memory holds a chunk of it): at most ``max_bytes`` an answer, and all of them before the
overall deadline. A server that floods (an
endless body) or drips (a byte at a time) is cut off with an error naming it, not waited on.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gpuyield.errors import FieldError, InputError
from gpuyield.ingest._budget import BudgetExceeded, copy_bounded

# Prometheus refuses a query_range of more than 11,000 points per series.
_MAX_POINTS = 10_000
#: The longest one read from the server may wait (a socket's timeout).
READ_TIMEOUT_S = 60.0
#: All the answers of one ingest, by default: a cluster-day at 100k GPUs is minutes of answers.
DEADLINE_S = 1800.0
#: The largest answer: Prometheus' own query limit (50M samples) is about this much JSON.
MAX_ANSWER_BYTES = 2 << 30


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """One answer of the server, saved."""

    url: str
    """The query asked (for errors and provenance)."""
    metric: str
    """The metric asked for (``last_over_time`` drops ``__name__`` from the series)."""
    path: Path
    """Where the answer's body was written."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """How long and how much one ingest may read from a server."""

    deadline_s: float = DEADLINE_S
    """Every answer read within this many seconds of the first request."""
    max_bytes: int = MAX_ANSWER_BYTES
    """No answer larger."""
    read_timeout_s: float = READ_TIMEOUT_S
    """No single read waits longer."""


def query_answers(
    url: str,
    metrics: list[str],
    *,
    since_s: int,
    until_s: int,
    step_s: int,
    out_dir: Path,
    limits: Limits = Limits(),
    feed: Callable[[bytes], None] | None = None,
) -> Iterator[Answer]:
    """Each metric and piece of the window, asked and saved under ``out_dir``; ``feed`` (when
    given) gets every answer's bytes in order (to hash the content)."""
    if until_s <= since_s:
        raise InputError(
            f"PrometheusSource.until_s ({until_s}) is not after PrometheusSource.since_s ({since_s})",
            hint="give the window to read, e.g. PrometheusSource.since_s 2026-11-01T00:00 "
            "PrometheusSource.until_s 2026-11-02T00:00",
        )
    if step_s <= 1:
        raise FieldError(
            "utilization.step_s", f"{step_s}s is too short", hint="the scrape interval, e.g. 60s"
        )
    base = url.rstrip("/") + "/api/v1/query_range"
    piece_s = _MAX_POINTS * step_s
    deadline = time.monotonic() + limits.deadline_s
    count = 0
    for metric in metrics:
        start = since_s
        while start <= until_s:
            end = min(until_s, start + piece_s - step_s)
            query = f"last_over_time({metric}[{step_s - 1}s])"
            params = {"query": query, "start": start, "end": end, "step": step_s}
            full = f"{base}?{urllib.parse.urlencode(params)}"
            count += 1
            path = out_dir / f"answer-{count:05d}.json"
            with path.open("wb") as out:
                _get(full, out, deadline, limits, feed)
            yield Answer(url=full, metric=metric, path=path)
            start = end + step_s


def _get(
    url: str,
    out: BinaryIO,
    deadline: float,
    limits: Limits,
    feed: Callable[[bytes], None] | None,
) -> None:
    """The answer to ``url`` written to ``out`` as it arrives (memory holds a chunk of it)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _too_slow(url, limits, "before this query was asked")
    try:
        timeout = min(limits.read_timeout_s, remaining)
        with urllib.request.urlopen(url, timeout=timeout) as response:
            copy_bounded(response, out, max_bytes=limits.max_bytes, deadline=deadline, feed=feed)
    except BudgetExceeded as error:
        if "deadline" in str(error):
            raise _too_slow(url, limits, str(error)) from None
        raise InputError(
            f"Prometheus at {url} {error}: more than one answer may hold",
            hint="ask for a shorter window (PrometheusSource.since_s/PrometheusSource.until_s) or fewer series; the most one "
            f"answer may be is {limits.max_bytes:,} bytes",
        ) from None
    except urllib.error.HTTPError as error:
        body = error.read(300).decode("utf-8", "replace")
        raise InputError(
            f"Prometheus answered {error.code} to {url}: {body}",
            hint="check PrometheusSource.url, the metric names and the window",
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise InputError(
            f"cannot read Prometheus at {url}: {error}",
            hint="is the server up and the URL right (http://host:9090)? a server that answers "
            f"slower than {limits.read_timeout_s:g} s a read is given up on",
        ) from None


def _too_slow(url: str, limits: Limits, detail: str) -> InputError:
    return InputError(
        f"Prometheus at {url} did not answer within {limits.deadline_s:g} s in all ({detail})",
        hint="ask for a shorter window (PrometheusSource.since_s/PrometheusSource.until_s), or allow longer with Limits.deadline_s",
    )
