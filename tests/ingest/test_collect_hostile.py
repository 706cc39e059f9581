"""``gpuyield collect`` and ``doctor`` against Slurm clients that misbehave (issues 25 and 26).

A client with no configuration (it retries for a minute, then fails), output that is not UTF-8, a
flood of output, a command whose child keeps its output open, a ``ClusterName`` that looks like a
path, an ``--until`` in the future. Each gives one clear error (or a failed doctor check), and the
store is unchanged. The client messages are the recorded ones (``fixtures/live-comments/``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuyield.errors import InputError
from gpuyield.ingest import collect as collect_mod
from gpuyield.ingest.collect import CollectError, collect
from gpuyield.ingest.doctor import Status, run_doctor
from gpuyield.serve.state import ServeSettings, ServeState
from tests.ingest.recorded_slurm import CONFIG, RecordedSlurm

FIXTURE = Path(__file__).with_name("fixtures") / "live-comments"
SINCE_S = 1_796_032_800  # 2026-11-30T10:00:00Z
UNTIL_S = 1_796_036_400


@pytest.fixture
def slurm(tmp_path: Path) -> RecordedSlurm:
    return RecordedSlurm(tmp_path / "slurm")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _without_config(slurm: RecordedSlurm, name: str) -> None:
    """What a client printed with SLURM_CONF naming a missing file: the first line at once, the
    rest after a minute of retrying (here: never, unless the caller waits it out)."""
    first, *rest = (FIXTURE / f"noconf-{name}.stderr").read_text().splitlines()
    (slurm.out / f"noconf-{name}-1").write_text(first + "\n")
    (slurm.out / f"noconf-{name}-2").write_text("\n".join(rest) + "\n")
    slurm.script(name, f'cat "$OUT/noconf-{name}-1" >&2; sleep 600; '
                       f'cat "$OUT/noconf-{name}-2" >&2; exit 1')  # fmt: skip


def test_no_client_configuration_is_not_a_daemon_down(slurm: RecordedSlurm) -> None:
    """doctor names the missing configuration and SLURM_CONF, not slurmctld or slurmdbd, at once
    (the clients' minute of retrying is cut short); collect's error says the same."""
    for name in ("sacct", "sacctmgr", "scontrol"):
        _without_config(slurm, name)
    report = run_doctor(slurm_bin=slurm.bin)
    checks = {c.name: c for c in report.checks}
    config = checks["Slurm client configuration"]
    assert config.status is Status.FAIL and "SLURM_CONF" in config.fix
    assert "cannot stat file /nonexistent/slurm.conf" in config.detail
    assert "slurmdbd answers" not in checks and "slurmctld answers" not in checks
    with pytest.raises(CollectError, match="found no Slurm configuration") as info:
        collect(slurm.out.parent / "db.duckdb", since_s=SINCE_S, until_s=UNTIL_S,
                slurm_bin=slurm.bin)  # fmt: skip
    assert "SLURM_CONF" in (info.value.hint or "") and "cron" in (info.value.hint or "")


def test_daemons_down_are_still_told_as_such(slurm: RecordedSlurm) -> None:
    """The recorded messages of a stopped slurmctld and slurmdbd: the daemon checks fail."""
    for name in ("scontrol", "sacctmgr"):
        (slurm.out / f"down-{name}").write_text((FIXTURE / f"down-{name}.stderr").read_text())
        slurm.script(name, f'cat "$OUT/down-{name}" >&2; exit 1')
    checks = {c.name: c for c in run_doctor(slurm_bin=slurm.bin).checks}
    assert checks["slurmctld answers"].status is Status.FAIL
    assert "Unable to contact slurm controller" in checks["slurmctld answers"].detail
    assert checks["slurmdbd answers"].status is Status.FAIL
    assert "Slurm client configuration" not in checks


def test_undecodable_output_is_a_failed_check_not_a_traceback(
    slurm: RecordedSlurm, tmp_path: Path
) -> None:
    (slurm.out / "config").write_bytes(b"ClusterName = lab\n\xff\xfe\x80 garbage\n")
    proc = subprocess.run(
        [sys.executable, "-m", "gpuyield", "doctor", "--slurm-bin", str(slurm.bin), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr and proc.returncode == 3, proc.stderr  # a failed check
    assert '"slurmctld answers"' in proc.stdout and "not UTF-8" in proc.stdout
    with pytest.raises(CollectError, match="not UTF-8"):
        collect(tmp_path / "db.duckdb", since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    assert not (tmp_path / "db.duckdb").exists()


def test_output_past_the_budget_stops_the_command_and_changes_nothing(
    slurm: RecordedSlurm, tmp_path: Path
) -> None:
    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    before = _digest(db)
    slurm.script("sacct", "yes 'x|x|x|x|x|x|x|x|x|x|x|x|x|x|x|x|x|x'")  # never ends by itself
    with pytest.raises(CollectError, match=r"printed more than 1048576 bytes: stopped"):
        collect(db, until_s=UNTIL_S + 600, slurm_bin=slurm.bin, max_output_bytes=1 << 20)
    assert _digest(db) == before


def test_a_child_keeping_the_output_open_does_not_hold_the_collection(
    slurm: RecordedSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sacct prints and exits, leaving a background child with its output open: collect goes on
    (it would otherwise wait the whole timeout and fail), and the child is stopped."""
    monkeypatch.setattr(collect_mod, "COMMAND_TIMEOUT_S", 120)
    pid_file = tmp_path / "child.pid"
    slurm.script("sacct", f'cat "$OUT/sacct"; sleep 100000 & echo $! > {pid_file}')
    outcome = collect(tmp_path / "db.duckdb", since_s=SINCE_S, until_s=UNTIL_S,
                      slurm_bin=slurm.bin)  # fmt: skip
    assert outcome.jobs_new == 39
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"the background child {pid} still runs"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_keep_raw_stays_inside_its_folder(tmp_path: Path) -> None:
    """A ClusterName of ../../x is a name, not a path; a symlink planted in the folder is
    refused."""
    slurm = RecordedSlurm(tmp_path / "slurm", config=CONFIG.replace("= lab", "= ../../x"))
    raw = tmp_path / "deep" / "raw"
    outcome = collect(tmp_path / "db.duckdb", since_s=SINCE_S, until_s=UNTIL_S,
                      slurm_bin=slurm.bin, keep_raw=raw)  # fmt: skip
    assert outcome.cluster == "../../x" and outcome.raw_dir is not None
    kept = Path(outcome.raw_dir)
    assert kept.parent == raw and kept.name == "______x-20261130T110000Z"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.duckdb", "deep", "slurm"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (raw / "lab-20261130T111000Z").symlink_to(elsewhere)
    good = RecordedSlurm(tmp_path / "slurm2")
    with pytest.raises(InputError, match="resolves outside"):
        collect(tmp_path / "db2.duckdb", since_s=SINCE_S, until_s=UNTIL_S + 600,
                slurm_bin=good.bin, keep_raw=raw)  # fmt: skip
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "db2.duckdb").exists()


def test_keep_raw_records_the_client_environment(
    slurm: RecordedSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/site.conf")
    outcome = collect(tmp_path / "db.duckdb", since_s=SINCE_S, until_s=UNTIL_S,
                      slurm_bin=slurm.bin, keep_raw=tmp_path / "raw")  # fmt: skip
    assert outcome.raw_dir is not None
    lines = (Path(outcome.raw_dir) / "commands.tsv").read_text().splitlines()
    assert all("\tSLURM_CONF=/etc/slurm/site.conf TZ=UTC " in line for line in lines), lines
    assert (
        '"SLURM_CONF": "/etc/slurm/site.conf"'
        in (Path(outcome.raw_dir) / "collection.json").read_text()
    )


def test_until_in_the_future_is_refused(slurm: RecordedSlurm, tmp_path: Path) -> None:
    """A window ending in 2030 would mark years as covered: every later collection would do
    nothing until then. A few minutes of clock skew pass."""
    db = tmp_path / "db.duckdb"
    args = [sys.executable, "-m", "gpuyield", "collect", "--db", str(db), "--slurm-bin",
            str(slurm.bin), "--since", "2026-11-30T10:00:00", "--until", "2030-01-01T00:00:00"]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "--until 2030-01-01T00:00:00Z is in the future" in proc.stderr
    assert "hint:" in proc.stderr and not db.exists()
    assert slurm.call_lines() == []  # refused before any Slurm command ran
    skewed = int(time.time()) + 60
    outcome = collect(db, since_s=skewed - 3600, until_s=skewed, slurm_bin=slurm.bin)
    assert outcome.until_s == skewed


def test_serve_answers_while_its_collection_runs_slurms_commands(
    slurm: RecordedSlurm, tmp_path: Path
) -> None:
    """The scheduled collection takes the store's write lock only for its write: while sacct
    runs, a request can still read the store."""
    from gpuyield.cli.serve import scheduled_collect

    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    started, release = tmp_path / "sacct-started", tmp_path / "sacct-release"
    slurm.script("sacct", f'touch {started}; while [ ! -e {release} ]; do sleep 0.1; done; '
                          'cat "$OUT/sacct"')  # fmt: skip
    os.environ["PATH"] = f"{slurm.bin}{os.pathsep}{os.environ['PATH']}"
    try:
        state = ServeState(ServeSettings(db=db, collect_fn=scheduled_collect(db), with_page=False))
        worker = threading.Thread(target=state.collect)
        worker.start()
        _wait_for(started)
        read = threading.Event()

        def reader() -> None:
            with state.store_lock.reading():
                read.set()

        threading.Thread(target=reader, daemon=True).start()
        # Generous: this waits for a lock, it does not time anything.
        assert read.wait(120), "a reader was blocked while Slurm's commands ran"
        release.touch()
        worker.join(300)
    finally:
        os.environ["PATH"] = os.environ["PATH"].split(os.pathsep, 1)[1]
    assert state.served.stats.collection_errors_total == 0, state.served.stats.last_error
    assert state.served.stats.collections_total == 1


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
