"""Reading utilization straight from a Prometheus server's HTTP API (``/api/v1/query_range``).

Each metric is asked for as ``last_over_time(metric[step - 1s])``: the sample scraped in each step,
and nothing once a series has ended. A plain ``metric`` query would repeat a series' last value for
the server's lookback (5 min) after it ends, counting GPUs as measured when nothing was scraped.
Long windows are asked in pieces below the server's 11,000 points per series.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

from gpuyield.errors import FieldError, InputError

# Prometheus refuses a query_range of more than 11,000 points per series.
_MAX_POINTS = 10_000
_TIMEOUT_S = 60.0


def query_documents(
    url: str, metrics: list[str], *, since_s: int, until_s: int, step_s: int
) -> Iterator[tuple[str, str, object]]:
    """(URL asked, metric, parsed JSON response) for each metric and piece of the window."""
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
    for metric in metrics:
        start = since_s
        while start <= until_s:
            end = min(until_s, start + piece_s - step_s)
            query = f"last_over_time({metric}[{step_s - 1}s])"
            params = {"query": query, "start": start, "end": end, "step": step_s}
            full = f"{base}?{urllib.parse.urlencode(params)}"
            yield full, metric, _get(full)
            start = end + step_s


def _get(url: str) -> object:
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        body = error.read().decode("utf-8", "replace")[:300]
        raise InputError(
            f"Prometheus answered {error.code} to {url}: {body}",
            hint="check PrometheusSource.url, the metric names and the window",
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise InputError(
            f"cannot reach Prometheus at {url}: {error}",
            hint="is the server up and the URL right (http://host:9090)?",
        ) from None
    except json.JSONDecodeError as error:
        raise InputError(f"{url}: the answer is not JSON: {error}") from None
