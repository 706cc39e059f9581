"""Hostile, inconsistent and stale input (issue 20): each input gives the right number, or an error
naming its file, line and field, exit code 1, no traceback, and the store as it was.

Every refused case first ingests the good cluster (inputs.py), then the hostile file(s) into the same
store: the store must be unchanged, row for row. docs/ledger.md, "what gpuyield refuses, and why",
lists the rules these check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pytest

from tests.hostile.inputs import (
    EVENTS_ROWS,
    INSTALLED_GPU_S,
    MANIFEST,
    NODES_LINES,
    SACCT_ROWS,
    base_files,
    conserves,
    events_text,
    ingest,
    nodes_text,
    report_json,
    run_cli,
    sacct_text,
    snapshot,
    write_files,
)

T0 = "2026-11-30T10:"
GOOD_TRES = "billing=8,cpu=8,gres/gpu=8,node=1"


def job(
    *,
    jid: str = "7",
    state: str = "COMPLETED",
    submit: str = f"{T0}20:00",
    start: str = f"{T0}20:00",
    end: str = f"{T0}30:00",
    elapsed: str = "600",
    tres: str = GOOD_TRES,
    nodes: str = "n3",
    nnodes: str = "1",
    comment: str = "run=x",
) -> str:
    """One sacct record (single line) with the given fields."""
    return (
        f"{jid}|{jid}|job{jid}|carol|ml|gpu|{state}|{submit}|{start}|{end}|{elapsed}|{tres}|"
        f"{nodes}|{nnodes}|{comment}"
    )


# --- Refused inputs -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Refused:
    """Hostile files (ingested after the good ones) and what the error must name."""

    files: dict[str, str | bytes]
    """Ingest flag -> file content."""
    line: int | None
    """The line the message names (None: the file only, e.g. a TOML key)."""
    field: str | None
    """The field named in the message ("(field X)"), or a key such as runs.match."""
    words: str
    """Part of the message."""
    kind: str = field(default="")
    """The file the message names (default: the only file given)."""


def _sacct(*rows: str) -> dict[str, str | bytes]:
    return {"sacct": sacct_text(*rows)}


def _manifest(text: str) -> dict[str, str | bytes]:
    return {"manifest": text}


def _regex(pattern: str) -> dict[str, str | bytes]:
    return _manifest(f'[runs]\nmatch = "comment:{pattern}"\n')


def _gpus(value: str) -> Refused:
    return Refused(
        files=_sacct(job(tres=f"billing=8,cpu=8,gres/gpu={value},node=1")),
        line=2,
        field="AllocTRES",
        words="GPU count is not a whole number",
    )


REFUSED = {
    # 2. regexes Python accepts and the engine (RE2) rejects
    "regex-lookahead": Refused(
        files=_regex(r"run=(?P<run>[^,]+)(?=,|$)"), line=None, field="runs.match",
        words="lookahead",
    ),
    "regex-lookbehind": Refused(
        files=_regex(r"(?<=run=)(?P<run>[^,]+)"), line=None, field="runs.match",
        words="lookbehind",
    ),
    "regex-backreference": Refused(
        files=_regex(r"run=(?P<run>[^,]+)(?P=run)"), line=None, field="runs.match",
        words="backreference",
    ),
    "regex-atomic": Refused(
        files=_regex(r"(?>run=)(?P<run>[^,]+)"), line=None, field="runs.match",
        words="atomic group",
    ),
    "regex-Z": Refused(
        files=_regex(r"run=(?P<run>[^,]+)\\Z"), line=None, field="runs.match", words="\\Z"
    ),
    # 3. times before any plausible cluster, or far in the future
    "start-epoch-0-iso": Refused(
        files=_sacct(job(submit="1970-01-01T00:00:00", start="1970-01-01T00:00:00")),
        line=2, field="Submit", words="time outside 2000..2100",
    ),
    "start-epoch-0-seconds": Refused(
        files=_sacct(job(submit="0", start="0", end="600")),
        line=2, field="Submit", words="time outside 2000..2100",
    ),
    "end-far-future": Refused(
        files=_sacct(job(end="2999-01-01T00:00:00")),
        line=2, field="End", words="time outside 2000..2100",
    ),
    "event-epoch-0": Refused(
        files={"events": events_text("lab||n1|Node|2|DOWN|1|0|0|00:00:00|x|root(0)|")},
        line=2, field="TimeStart", words="time outside 2000..2100",
    ),
    # 4. hostlists without a cap: refused before any expansion
    "sacct-hostlist-100M": Refused(
        files=_sacct(job(nodes="n[0-99999999]", nnodes="100000000")),
        line=2, field="NodeList", words="more nodes than the cluster has",
    ),
    "sacct-hostlist-10G": Refused(
        files=_sacct(job(nodes="n[0-9999999999]", nnodes="10000000000")),
        line=2, field="NodeList", words="more nodes than the cluster has",
    ),
    "events-hostlist-100M": Refused(
        files={"events": events_text(
            "lab|n[0-99999999]||Cluster|1||0|2026-11-30T09:00:00|Unknown|01:00:00|"
            "Cluster Registered TRES||gres/gpu=32"
        )},
        line=2, field="ClusterNodes", words="more than 1,000,000",
    ),
    "sinfo-hostlist-100M": Refused(
        files={"nodes": "n[0-99999999]|gpu:8\n"},
        line=1, field="NODELIST", words="more than 200,000",
    ),
    "sinfo-hostlist-10G": Refused(
        files={"nodes": "n[0-9999999999]|gpu:8\n"},
        line=1, field="NODELIST", words="more than 200,000",
    ),
    # 5. what used to be tracebacks
    "field-over-2MB": Refused(
        files=_sacct(job(comment="run=x," + "y" * 2_100_000)),
        line=2, field=None, words="more than 2,000,000",
    ),
    "toml-nested": Refused(
        files=_manifest("a = " + "[" * 5000 + "]" * 5000 + "\n"),
        line=None, field=None, words="not valid TOML",
    ),
    # 6. GPU counts: whole non-negative decimal numbers, no more than the nodes have
    "gpus-negative": _gpus("-8"),
    "gpus-1.4": _gpus("1.4"),
    "gpus-0.4": _gpus("0.4"),
    "gpus-2.5": _gpus("2.5"),
    "gpus-hex": _gpus("0x10"),
    "gpus-more-than-nodes": Refused(
        files=_sacct(job(tres="gres/gpu=100000")),
        line=2, field="AllocTRES", words="the job holds 100000 GPUs",
    ),
    "inventory-gres-negative": Refused(
        files={"nodes": nodes_text(NODES_LINES[0].replace("Gres=gpu:8", "Gres=gpu:-8"))},
        line=1, field="Gres", words="GPU count is not a whole number",
    ),
    "inventory-cfgtres-negative": Refused(
        files={"nodes": nodes_text(NODES_LINES[0].replace("gres/gpu=8", "gres/gpu=-8"))},
        line=1, field="CfgTRES", words="GPU count is not a whole number",
    ),
    # 7. NNodes must match NodeList
    "nnodes-0": Refused(
        files=_sacct(job(nnodes="0")), line=2, field="NNodes", words="does not match"
    ),
    "nnodes-3-on-one-node": Refused(
        files=_sacct(job(nnodes="3")), line=2, field="NNodes", words="does not match"
    ),
    # 9. silent drops and guesses
    "finished-without-end": Refused(
        files={"sacct": "JobID|JobIDRaw|State|Start|End|AllocTRES|NodeList\n"
               f"7|7|COMPLETED|{T0}20:00|Unknown|gres/gpu=8|n3\n"},
        line=2, field="End", words="a finished job without an end time",
    ),
    "duplicate-run-differs": Refused(
        files=_sacct(job(), job(end=f"{T0}40:00", elapsed="1200")),
        line=3, field="JobIDRaw", words="same JobIDRaw and Submit as line 2",
    ),
    "released-and-diverged": Refused(
        files=_manifest(MANIFEST + '\n[[diverged]]\nrun = "a"\n'),
        line=None, field=None, words="both in a release's runs and in diverged",
    ),
    "manifest-unknown-key": Refused(
        files=_manifest(MANIFEST.replace("[runs]\n", "[runs]\ncheckpoint_intervl_s = 60\n")),
        line=None, field="runs", words="unknown key 'checkpoint_intervl_s'",
    ),
    "manifest-unknown-release-key": Refused(
        files=_manifest(MANIFEST + 'modle = "typo"\n'),
        line=None, field="releases[0]", words="unknown key 'modle'",
    ),
    "manifest-nan-interval": Refused(
        files=_manifest(MANIFEST + "\n[run_settings.a]\ncheckpoint_interval_s = nan\n"),
        line=None, field="run_settings.a.checkpoint_interval_s", words="not a finite number",
    ),
    "inventory-names-differ-from-events": Refused(
        files={"nodes": nodes_text(*(n.replace("NodeName=n", "NodeName=node") for n in NODES_LINES))},
        line=1, field=None, words="is in no cluster registration",
    ),
}  # fmt: skip


def _check_refused(outcome_output: str, path: Path, case: Refused) -> None:
    where = f"{path}:{case.line}:" if case.line is not None else f"{path}:"
    assert where in outcome_output, outcome_output
    assert case.words in outcome_output, outcome_output
    if case.field is not None:
        assert f"(field {case.field})" in outcome_output or case.field in outcome_output
    assert "hint:" in outcome_output


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name: str, base_db: Path, tmp_path: Path) -> None:
    case = REFUSED[name]
    before = snapshot(base_db)
    paths = write_files(tmp_path, case.files, "hostile")
    outcome = ingest(base_db, paths)
    assert outcome.traceback is None, outcome.traceback
    assert outcome.exit_code == 1, outcome.output
    assert "Traceback" not in outcome.output
    kind = case.kind or next(iter(case.files))
    _check_refused(outcome.output, paths[kind], case)
    assert snapshot(base_db) == before, "a failed ingest changed the store"


# --- Right numbers --------------------------------------------------------------------------


def _ingest_report(
    tmp_path: Path, files: dict[str, str | bytes], tag: str = "x"
) -> dict[str, object]:
    db = tmp_path / f"{tag}.duckdb"
    outcome = ingest(db, write_files(tmp_path, files, tag))
    assert outcome.traceback is None, outcome.traceback
    assert outcome.exit_code == 0, outcome.output
    data = report_json(db)
    assert conserves(data)
    return data


def _category(data: dict[str, object], name: str) -> float:
    categories = data["categories"]
    assert isinstance(categories, dict)
    return float(categories[name])


def test_base_numbers(tmp_path: Path) -> None:
    data = _ingest_report(tmp_path, base_files())
    assert data["installed_gpu_seconds"] == INSTALLED_GPU_S
    assert _category(data, "released") == 4_800
    assert _category(data, "failed") == 4_800


@pytest.mark.parametrize(
    ("name", "row", "experiment_gpu_s"),
    [
        # Start=Unknown with End and ElapsedRaw: it ran [End - ElapsedRaw, End).
        ("start-unknown", job(start="Unknown"), 4_800),
        # COMPLETED with End=Unknown: it ended at Start + ElapsedRaw, not at the capture time.
        ("end-unknown", job(end="Unknown"), 4_800),
        # The same record twice (a concatenated capture): counted once.
        ("identical-duplicate", None, 4_800),
    ],
)
def test_right_number(name: str, row: str | None, experiment_gpu_s: int, tmp_path: Path) -> None:
    rows = (job(), job()) if row is None else (row,)
    files = base_files()
    files["sacct"] = sacct_text(*SACCT_ROWS, *rows)
    data = _ingest_report(tmp_path, files)
    assert _category(data, "experiment") == experiment_gpu_s


def test_event_of_a_hostlist_is_one_event_per_node(tmp_path: Path) -> None:
    files = base_files()
    files["events"] = events_text(
        *EVENTS_ROWS,
        f"lab||n[3-4]|Node|2|MAINT|1|{T0}30:00|{T0}40:00|00:10:00|planned maintenance|root(0)|",
    )
    data = _ingest_report(tmp_path, files)
    subcategories = data["subcategories"]
    assert isinstance(subcategories, dict)
    assert subcategories["down.planned"] == 2 * 8 * 600  # two nodes, not one literal "n[3-4]"


def _released_after(db: Path) -> float:
    return _category(report_json(db), "released")


def test_latest_manifest_wins_whatever_its_hash(base_db: Path, tmp_path: Path) -> None:
    first = _released_after(base_db)
    other = write_files(
        tmp_path, {"manifest": MANIFEST.replace('runs = ["a"]', 'runs = ["b"]')}, "b"
    )
    assert ingest(base_db, other).exit_code == 0
    assert _released_after(base_db) == 0  # run b failed: nothing of it is released
    again = write_files(tmp_path, {"manifest": MANIFEST}, "a-again")
    outcome = ingest(base_db, again)
    assert outcome.exit_code == 0, outcome.output
    assert _released_after(base_db) == first == 4_800


def test_latest_inventory_wins_whatever_its_hash(base_db: Path, tmp_path: Path) -> None:
    original = write_files(tmp_path, {"nodes": base_files()["nodes"]}, "orig")
    changed = nodes_text(
        *(n.replace("gpu:8", "gpu:16").replace("gpu=8", "gpu=16") for n in NODES_LINES)
    )
    assert ingest(base_db, write_files(tmp_path, {"nodes": changed}, "changed")).exit_code == 0
    assert report_json(base_db)["installed_gpu_seconds"] == INSTALLED_GPU_S * 2
    outcome = ingest(base_db, original)
    assert outcome.exit_code == 0, outcome.output
    assert report_json(base_db)["installed_gpu_seconds"] == INSTALLED_GPU_S


def test_stored_manifest_the_engine_rejects_is_one_clear_error(base_db: Path) -> None:
    """A store written before regexes were checked: the report says what to do, and ingesting a
    corrected manifest makes the store usable again."""
    con = duckdb.connect(str(base_db))
    document = con.execute("SELECT document FROM manifests").fetchall()[0][0]
    bad = document.replace("run=(?P<run>", "run=(?=x)(?P<run>")
    con.execute("INSERT INTO manifests VALUES (999, ?)", [bad])
    con.close()
    outcome = run_cli(["report", "--db", str(base_db)])
    assert outcome.traceback is None and outcome.exit_code == 1
    assert "lookahead" in outcome.output and "ingest a corrected manifest" in outcome.output


# --- Terminal escapes -----------------------------------------------------------------------

HOSTILE_COMMENT = "run=abc\x1b[31mRED\x1b]0;pwned\x07"


@pytest.mark.parametrize("by", ["run", "user", "account", "partition", "job"])
def test_terminal_escapes_are_shown_escaped(by: str, tmp_path: Path) -> None:
    files = base_files()
    hostile = job(comment=HOSTILE_COMMENT).replace(
        "|carol|ml|gpu|", "|c\x1b[2Jarol|m\x1bl|g\x9bpu|"
    )
    files["sacct"] = sacct_text(*SACCT_ROWS, hostile)
    db = tmp_path / "esc.duckdb"
    assert ingest(db, write_files(tmp_path, files, "esc")).exit_code == 0
    outcome = run_cli(["report", "--db", str(db), "--by", by])
    assert outcome.exit_code == 0, outcome.output
    assert "\x1b" not in outcome.output and "\x07" not in outcome.output
    assert "\x9b" not in outcome.output
    if by in ("run", "user", "account"):
        assert "\\x1b" in outcome.output


def test_html_report_has_no_control_characters(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    files = base_files()
    files["sacct"] = sacct_text(*SACCT_ROWS, job(comment=HOSTILE_COMMENT))
    db = tmp_path / "esc.duckdb"
    assert ingest(db, write_files(tmp_path, files, "esc")).exit_code == 0
    html = tmp_path / "r.html"
    outcome = run_cli(["report", "--db", str(db), "--html", str(html)])
    assert outcome.exit_code == 0, outcome.output
    text = html.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\x07" not in text


# --- Paths and stores -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("directory", "is a directory"),
        ("dev-zero", "is not a regular file"),
        ("symlink-loop", "symbolic links"),
        ("missing", "no such file"),
    ],
)
def test_input_path_messages(name: str, words: str, base_db: Path, tmp_path: Path) -> None:
    target = {
        "directory": tmp_path,
        "dev-zero": Path("/dev/zero"),
        "symlink-loop": tmp_path / "loop1",
        "missing": tmp_path / "nothing.psv",
    }[name]
    if name == "symlink-loop":
        os.symlink(tmp_path / "loop2", tmp_path / "loop1")
        os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    before = snapshot(base_db)
    outcome = ingest(base_db, {"sacct": target})
    assert outcome.traceback is None and outcome.exit_code == 1
    assert words in outcome.output, outcome.output
    assert snapshot(base_db) == before


def _sqlite(path: Path) -> None:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()


def _truncated(path: Path, good: Path) -> None:
    path.write_bytes(good.read_bytes()[:300_000])


def _bit_flipped(path: Path, good: Path) -> None:
    data = bytearray(good.read_bytes())
    for at in range(20_000, len(data), 4096):
        data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("sqlite", "is an SQLite database"),
        ("truncated", "not a readable gpuyield store"),
        ("bit-flipped", "not a readable gpuyield store"),
        ("directory", "not a file"),
    ],
)
def test_store_messages(name: str, words: str, base_db: Path, tmp_path: Path) -> None:
    db = tmp_path / f"{name}.duckdb"
    if name == "sqlite":
        _sqlite(db)
    elif name == "truncated":
        _truncated(db, base_db)
    elif name == "bit-flipped":
        _bit_flipped(db, base_db)
    else:
        db.mkdir()
    for args in (
        ["report", "--db", str(db)],
        [
            "ingest",
            "slurm",
            "--db",
            str(db),
            "--sacct",
            str(write_files(tmp_path, base_files(), "s")["sacct"]),
        ],
    ):
        outcome = run_cli(args)
        assert outcome.traceback is None, outcome.traceback
        assert outcome.exit_code == 1
        assert words in outcome.output, outcome.output
        assert "another gpuyield process" not in outcome.output


def test_no_connection_autoloads_extensions(tmp_path: Path) -> None:
    from gpuyield import store

    con = store.connect(tmp_path / "s.duckdb")
    settings = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name LIKE 'auto%_known_extensions'"
        ).fetchall()
    )
    con.close()
    assert settings == {
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }


def test_lenient_rejects_every_record_of_a_run_that_disagrees(tmp_path: Path) -> None:
    files = base_files()
    files["sacct"] = sacct_text(*SACCT_ROWS, job(), job(end=f"{T0}40:00", elapsed="1200"))
    db = tmp_path / "lenient.duckdb"
    outcome = ingest(db, write_files(tmp_path, files, "dup"), "--lenient")
    assert outcome.exit_code == 0, outcome.output
    con = duckdb.connect(str(db), read_only=True)
    try:
        rejected = con.execute("SELECT line, field FROM rejects ORDER BY line").fetchall()
        kept = con.execute("SELECT count(*) FROM jobs WHERE job_id_raw = '7'").fetchall()
    finally:
        con.close()
    assert rejected == [(4, "JobIDRaw"), (5, "JobIDRaw")] and kept == [(0,)]


def test_a_held_lock_is_the_only_another_process_message(base_db: Path) -> None:
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(base_db)!r}); "
         "print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        outcome = run_cli(["report", "--db", str(base_db)])
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert outcome.traceback is None and outcome.exit_code == 1
    assert "another gpuyield process" in outcome.output, outcome.output
