"""Which GPUs each running job holds: ``scontrol -d -o show job`` into ``job_gpus``.

sacct says how many GPUs a job held on each node, never which ones, so unlabelled utilization
samples on a node shared by several jobs could not be charged to any of them. Slurm's controller
knows the indices while the job runs: with ``-d`` (detail) each job record gains one group per set
of nodes with the same allocation, e.g. (Slurm 22.05.8, ``tests/ingest/fixtures/jobs-detail/``)::

    JobId=4 JobName=multi ... StartTime=2026-12-01T22:39:04 ... JOB_GRES=gpu:6
      Nodes=n[2-3] CPU_IDs=0 Mem=256 GRES=gpu:3(IDX:0-2) MinCPUsNode=1 ...

A GPU item may carry a type (``gpu:a100:2(IDX:0-1)``) and older Slurm names the key ``GRES_IDX``.
The detail exists only while Slurm remembers the job: a finished job prints ``GRES=`` (empty) and
is gone after ``MinJobAge``, so it must be captured while jobs run (``gpuyield collect`` runs it
every collection). Jobs without indices (pending, finished, no GPUs) are counted as skipped.

Each stored row is one GPU of one run: ``(cluster, job_id_raw, start_s, node, gpu)``, the key that
makes a re-read idempotent; ``start_s`` (StartTime, as sacct's Start) tells a requeued job's runs
apart. ``first_seen_s``/``last_seen_s`` span the captures that showed it, each capture's time being
StartTime + RunTime (the capture time, for a job never suspended). The ledger joins the rows to
the job run with the same cluster, JobIDRaw and start (``ledger/utilization.py``).

The same capture gives each running job's ``Comment`` (its run and family tags), which sacct
prints only after the job's end: kept per job run in ``job_comments`` (the latest capture's) and
given to the running job's row by ``ingest/running.py``. Slurm prints it as a line of its own
(``Comment=TEXT `` in the multi-line form, ``Comment=TEXT  NextKey=`` with ``-o``), and the text may
hold spaces and ``=`` (``tests/ingest/fixtures/live-comments/``).

Both ``-o`` (one record per line) and the multi-line form are read; lines are 1-based in errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.errors import ParseError
from gpuyield.hostlist import expand_hostlist
from gpuyield.ingest._sql import Problem, store_rejects
from gpuyield.ingest.events import rows_table, time_field

SOURCE = "slurm.jobs_detail"
COMMAND = "scontrol -d -o show job"
_HINT = f"give `{COMMAND}` output, captured while the jobs run"
_NO_JOBS = "No jobs in the system"  # what scontrol prints when there are none
_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_]*)=")
_COMMENT = re.compile(r"(?:(?<=\s)|^)Comment=")
_COMMENT_END = re.compile(r"  (?=[A-Za-z][A-Za-z0-9_:/]*=)")
# A GPU item with indices: gpu, optional type and count, then (IDX:0-1,4) (maybe more, e.g. S:0).
_GPU_IDX = re.compile(r"(?:^|,)gpu(?::[^:(,]+)*\(([^)]*)\)")
_RUN_TIME = re.compile(r"(?:(\d+)-)?(\d+):(\d\d):(\d\d)")
_HOLDING_STATES = frozenset({"RUNNING", "SUSPENDED", "COMPLETING", "STOPPED"})
#: Highest GPU index accepted: far beyond any node, low enough to catch a garbled number.
MAX_GPU_INDEX = 1023
COLUMNS: dict[str, pa.DataType] = {
    "cluster": pa.string(),
    "job_id_raw": pa.string(),
    "start_s": pa.int64(),
    "node": pa.string(),
    "gpu": pa.int64(),
    "seen_s": pa.int64(),
    "line": pa.int64(),
}
COMMENT_COLUMNS: dict[str, pa.DataType] = {
    "cluster": pa.string(),
    "job_id_raw": pa.string(),
    "start_s": pa.int64(),
    "comment": pa.string(),
    "seen_s": pa.int64(),
    "line": pa.int64(),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class JobsDetailStage:
    """The GPUs held by the jobs of one ``scontrol -d show job`` capture."""

    rows_read: int
    """Job records in the file."""
    rows_skipped: int
    """Job records naming no GPU index (pending, finished, jobs without GPUs)."""
    gpus: pa.Table
    """``COLUMNS``: one row per job, node and GPU index."""
    comments: pa.Table
    """``COMMENT_COLUMNS``: the comment of each running job that has one (its run tags)."""
    problems: tuple[Problem, ...]
    """Rejected records in lenient mode."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Pair:
    key: str
    value: str
    line: int


def _records(path: Path) -> list[list[_Pair]]:
    """Each job's ``Key=value`` pairs with their lines: a record starts at ``JobId=``; the
    multi-line form continues it on indented lines."""
    records: list[list[_Pair]] = []
    text = path.read_text(encoding="utf-8-sig")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.strip() == _NO_JOBS:
            continue
        starts = line.lstrip().startswith("JobId=")
        if not starts and not (records and line[:1].isspace()):
            raise ParseError(
                f"not a job record of `{COMMAND}` ({line.strip()[:60]!r})",
                path=path,
                line=number,
                field="JobId",
                hint=_HINT,
            )
        if starts:
            records.append([])
        records[-1] += _pairs(line, number)
    return records


def _pairs(line: str, number: int) -> list[_Pair]:
    """A line's ``Key=value`` pairs. The comment is the user's free text (spaces, ``=``): Slurm
    prints it as a line of its own, ``Comment=TEXT `` (in ``-o`` form followed by a second space),
    so its value runs to the first two spaces before a key, or to the end of the line."""
    found = _COMMENT.search(line)
    if found is None:
        return _split(line, number)
    end = _COMMENT_END.search(line, found.end())
    stop = len(line) if end is None else end.start()
    text = line[found.end() : stop]
    comment = _Pair(key="Comment", value=text[:-1] if text.endswith(" ") else text, line=number)
    return [*_split(line[: found.start()], number), comment, *_split(line[stop:], number)]


def _split(text: str, number: int) -> list[_Pair]:
    keys = list(_KEY.finditer(text))
    return [
        _Pair(
            key=m.group(1),
            value=text[m.end() : keys[i + 1].start() if i + 1 < len(keys) else None].strip(),
            line=number,
        )
        for i, m in enumerate(keys)
    ]


def read_jobs_detail(path: Path, *, tz: str, lenient: bool, cluster: str) -> JobsDetailStage:
    """Parse a capture; the first malformed record raises ParseError (lenient: counted)."""
    rows: list[dict[str, object]] = []
    tags: list[dict[str, object]] = []
    problems: list[Problem] = []
    records = _records(path)
    skipped = 0
    for record in records:
        try:
            held = _held(record, tz, cluster)
            tags += _tag(record, tz, cluster)
        except ParseError as error:
            line = next((p.line for p in record if p.key == error.field), record[0].line)
            if not lenient:
                raise ParseError(
                    error.reason, path=path, line=line, field=error.field, hint=error.hint
                ) from None
            raw = " ".join(f"{p.key}={p.value}" for p in record)[:2000]
            problems.append(
                Problem(line=line, field=error.field or "", message=error.reason, raw=raw)
            )
            continue
        skipped += not held
        rows += held
    return JobsDetailStage(
        rows_read=len(records),
        rows_skipped=skipped,
        gpus=rows_table(rows, COLUMNS),
        comments=rows_table(tags, COMMENT_COLUMNS),
        problems=tuple(problems),
    )


def _tag(record: list[_Pair], tz: str, cluster: str) -> list[dict[str, object]]:
    """A running job's comment as the controller has it now (sacct prints it only after the
    job's end; ingest/running.py): one row, or none (no comment, not running)."""
    first: dict[str, _Pair] = {}
    for pair in record:
        first.setdefault(pair.key, pair)
    comment = first.get("Comment")
    state = first.get("JobState")
    if comment is None or not comment.value or state is None or state.value not in _HOLDING_STATES:
        return []
    start = time_field(
        first["StartTime"].value if "StartTime" in first else "", tz, field="StartTime"
    )
    if start is None:
        raise ParseError("a running job without a start", field="StartTime", hint=_HINT)
    run_time = first["RunTime"].value if "RunTime" in first else ""
    return [
        {
            "cluster": cluster,
            "job_id_raw": first["JobId"].value,
            "start_s": start,
            "comment": comment.value,
            "seen_s": start + _run_time_s(run_time),
            "line": comment.line,
        }
    ]


def _held(record: list[_Pair], tz: str, cluster: str) -> list[dict[str, object]]:
    """The record's (node, GPU) rows; none when it names no GPU index."""
    first: dict[str, str] = {}
    for pair in record:
        first.setdefault(pair.key, pair.value)
    job = first.get("JobId", "")
    if not job.isascii() or not job.isdigit():
        raise ParseError(f"job id is not a number: {job!r}", field="JobId", hint=_HINT)
    groups = _node_groups(record)
    if not groups:
        if first.get("JobState") in _HOLDING_STATES and "gres/gpu=" in first.get("TRES", ""):
            raise ParseError(
                f"job {job} holds GPUs but the record has no per-node detail (Nodes=...)",
                field="Nodes",
                hint=f"run scontrol with -d: `{COMMAND}`",
            )
        return []
    if not any(gpus for _, gpus in groups):
        return []
    start = time_field(first.get("StartTime", ""), tz, field="StartTime")
    if start is None:
        raise ParseError("a job holding GPUs without a start", field="StartTime", hint=_HINT)
    seen = start + _run_time_s(first.get("RunTime", ""))
    return [
        {
            "cluster": cluster,
            "job_id_raw": job,
            "start_s": start,
            "node": node,
            "gpu": gpu,
            "seen_s": seen,
            "line": line,
        }
        for (nodes, line), gpus in groups
        for node in nodes
        for gpu in gpus
    ]


def _node_groups(record: list[_Pair]) -> list[tuple[tuple[list[str], int], list[int]]]:
    """``((nodes, line), gpu indices)`` per ``Nodes=`` group: the GRES after it is its own."""
    groups: list[tuple[tuple[list[str], int], list[int]]] = []
    for pair in record:
        if pair.key == "Nodes":
            try:
                nodes = expand_hostlist(pair.value)
            except ValueError as error:
                raise ParseError(str(error), field="Nodes", hint=_HINT) from None
            groups.append(((nodes, pair.line), []))
        elif pair.key in ("GRES", "GRES_IDX") and groups:
            groups[-1][1].extend(_indices(pair.value, pair.key))
    return groups


def _indices(gres: str, key: str) -> list[int]:
    """GPU indices of a detail GRES value: ``gpu:2(IDX:0-1)``, ``gpu:a100:1(IDX:3),mps:0``."""
    found: list[int] = []
    for inside in _GPU_IDX.findall(gres):
        if "IDX:" not in inside:
            continue
        # The IDX list itself may hold commas: everything after "IDX:" up to the parenthesis.
        spec = inside.split("IDX:", 1)[1]
        for part in spec.split(","):
            low, _, high = part.partition("-")
            if not (low.isdigit() and (high.isdigit() or not high)):
                raise ParseError(
                    f"GPU index list {spec!r} is not like 0-1,4", field=key, hint=_HINT
                )
            first, last = int(low), int(high or low)
            if first > last or last > MAX_GPU_INDEX:
                raise ParseError(f"GPU index range {part!r} is not valid", field=key, hint=_HINT)
            found += range(first, last + 1)
    return found


def _run_time_s(text: str) -> int:
    match = _RUN_TIME.fullmatch(text.strip())
    if match is None:
        raise ParseError(f"not a run time: {text!r}", field="RunTime", hint=_HINT)
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def load_jobs_detail(
    con: duckdb.DuckDBPyConnection, stage: JobsDetailStage, ingest_id: int, path: Path
) -> None:
    """Merge the capture into ``job_gpus``: a GPU seen before keeps one row whose seen span
    grows; inside the caller's transaction."""
    store_rejects(con, ingest_id, path, list(stage.problems))
    con.register("gy_jobs_detail_stage", stage.gpus)
    try:
        con.execute(
            """CREATE OR REPLACE TEMP TABLE gy_jobs_detail_new AS
               WITH n AS (SELECT cluster, job_id_raw, start_s, node, gpu, min(seen_s) AS first_s,
                                 max(seen_s) AS last_s, min(line) AS line
                          FROM gy_jobs_detail_stage GROUP BY ALL)
               SELECT n.cluster, n.job_id_raw, n.start_s, n.node, n.gpu,
                      least(n.first_s, coalesce(o.first_seen_s, n.first_s)) AS first_seen_s,
                      greatest(n.last_s, coalesce(o.last_seen_s, n.last_s)) AS last_seen_s,
                      ? AS ingest_id, n.line
               FROM n LEFT JOIN job_gpus o USING (cluster, job_id_raw, start_s, node, gpu)""",
            [ingest_id],
        )
    finally:
        con.unregister("gy_jobs_detail_stage")
    con.execute(
        """DELETE FROM job_gpus o WHERE EXISTS (SELECT 1 FROM gy_jobs_detail_new n
           WHERE n.cluster = o.cluster AND n.job_id_raw = o.job_id_raw AND n.start_s = o.start_s
             AND n.node = o.node AND n.gpu = o.gpu)"""
    )
    con.execute("INSERT INTO job_gpus SELECT * FROM gy_jobs_detail_new")
    con.execute("DROP TABLE gy_jobs_detail_new")
    _load_comments(con, stage.comments, ingest_id)


def _load_comments(con: duckdb.DuckDBPyConnection, comments: pa.Table, ingest_id: int) -> None:
    """Keep the latest capture's comment per job run (a comment can be changed while the job
    runs: ``scontrol update job ... Comment=``); an older capture ingested later changes nothing."""
    if comments.num_rows == 0:
        return
    con.register("gy_job_comments_stage", comments)
    try:
        con.execute(
            """CREATE OR REPLACE TEMP TABLE gy_job_comments_new AS
               SELECT cluster, job_id_raw, start_s, arg_max(comment, seen_s) AS comment,
                      max(seen_s) AS seen_s, ? AS ingest_id, arg_max(line, seen_s) AS line
               FROM gy_job_comments_stage GROUP BY ALL""",
            [ingest_id],
        )
    finally:
        con.unregister("gy_job_comments_stage")
    con.execute(
        """DELETE FROM gy_job_comments_new n WHERE EXISTS (SELECT 1 FROM job_comments o
           WHERE o.cluster = n.cluster AND o.job_id_raw = n.job_id_raw
             AND o.start_s = n.start_s AND o.seen_s > n.seen_s)"""
    )
    con.execute(
        """DELETE FROM job_comments o WHERE EXISTS (SELECT 1 FROM gy_job_comments_new n
           WHERE n.cluster = o.cluster AND n.job_id_raw = o.job_id_raw
             AND n.start_s = o.start_s)"""
    )
    con.execute("INSERT INTO job_comments SELECT * FROM gy_job_comments_new")
    con.execute("DROP TABLE gy_job_comments_new")
