"""The ladder workload on the real lab: one family climbs 1 -> 8 -> 16 GPUs, one jumps to 16 and fails.

Run by the session fixture after the lab's other phases (``conftest.lab_run``), on the lab
restarted with four 8-GPU nodes. n3 is left out: the resize phase put it in a MAINT reservation.
The climbing family is named by the manifest's pattern (``ladder-climb-*``); the jumping one by
its own comment (``family=yolo``), so both ways of naming a family meet real sacct output.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.slurm import lab, oracle

HOOK = lab.REPO_ROOT / "examples" / "ladder" / "preflight-prolog.sh"
# Held jobs the example prolog judges through scontrol: (comment, sbatch arguments).
HELD = {
    "yolo-again": ("run=yolo-32,family=yolo", ("-N", "4", "--gres=gpu:8")),
    "climb-next": ("run=ladder-climb-32", ("-N", "4", "--gres=gpu:8")),
}

EVENT_FORMAT = (
    "Cluster,ClusterNodes,NodeName,Event,EventRaw,State,StateRaw,Start,End,"
    "Duration,Reason,User,TRES"
)
MANIFEST = """# written by tests/slurm/ladder_lab.py
[[families]]
name = "climb"
runs = "ladder-climb-*"

[ladder]
rungs = [1, 8, 16]
within_days = 1
"""
# role -> sbatch arguments; a role's dependency is the role before it in CLIMB.
CLIMB = {
    "ladder-climb-1": ("-w", "n1", "--gres=gpu:1", "--wrap=sleep 2"),
    "ladder-climb-8": ("-w", "n1", "--gres=gpu:8", "--wrap=sleep 2"),
    "ladder-climb-16": ("-N", "2", "-w", "n[1-2]", "--gres=gpu:8", "--wrap=sleep 3"),
}
JUMP = ("-N", "2", "-w", "n[2,4]", "--gres=gpu:8", "--wrap=sleep 3; exit 1")


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderCapture:
    """What the ladder phase left: capture files, job ids by role, the window end."""

    capture: Path  # sacct.psv, events.psv, nodes.txt, manifest.toml
    job_ids: dict[str, str]  # role -> job id (the jump is "yolo-16")
    end_s: int
    # role in HELD -> (exit status, stdout + stderr) of examples/ladder/preflight-prolog.sh
    hook: dict[str, tuple[int, str]] = field(default_factory=dict)


def run_ladder_phase(lab_dir: Path, keep: Path) -> LadderCapture:
    """Submit both families, wait for them, capture sacct, events and nodes."""
    out = keep / "ladder"
    out.mkdir()
    env = lab.lab_env(lab_dir)
    start_s = int(time.time()) - 5
    submit = ("sbatch", "--parsable", f"--chdir={lab_dir / 'jobs'}", "-o", "/dev/null", "-c", "1")
    job_ids: dict[str, str] = {}
    job_ids["yolo-16"] = lab.run(
        [*submit, "--comment=run=yolo-16,family=yolo", *JUMP], env, timeout_s=60
    ).strip()
    previous: str | None = None
    for role, args in CLIMB.items():
        after = [f"--dependency=afterok:{previous}"] if previous else []
        previous = lab.run(
            [*submit, *after, f"--comment=run={role}", *args], env, timeout_s=60
        ).strip()
        job_ids[role] = previous
    lab.wait_until_done(env, tuple(job_ids.values()), timeout_s=180)
    time.sleep(2)  # slurmdbd writes the last job's end a moment after it leaves the queue
    end_s = int(time.time())
    window = ("-S", oracle.format_time(start_s), "-E", oracle.format_time(end_s))
    for name, args in {
        "sacct.psv": ("sacct", "-a", "-P", "-X", "-D", f"--format={oracle.SACCT_FORMAT}", *window),
        "events.psv": ("sacctmgr", "-P", "show", "event", "All_Time", f"format={EVENT_FORMAT}"),
        "nodes.txt": ("scontrol", "-o", "show", "nodes"),
    }.items():
        (out / name).write_text(lab.run(list(args), env, timeout_s=60))
    (out / "manifest.toml").write_text(MANIFEST)
    hook = _judge_held_jobs(lab_dir, out, end_s)
    return LadderCapture(capture=out, job_ids=job_ids, end_s=end_s, hook=hook)


def _judge_held_jobs(lab_dir: Path, out: Path, end_s: int) -> dict[str, tuple[int, str]]:
    """Ingest the capture, submit held jobs, run the example prolog on each as slurmctld would."""
    env = lab.lab_env(lab_dir)
    db = out / "live.duckdb"
    subprocess.run(
        [sys.executable, "-m", "gpuyield", "ingest", "slurm", "--db", str(db),
         "--sacct", str(out / "sacct.psv"), "--events", str(out / "events.psv"),
         "--nodes", str(out / "nodes.txt"), "--manifest", str(out / "manifest.toml"),
         "--until", oracle.format_time(end_s)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    wrapper = out / "gpuyield"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m gpuyield "$@"\n')
    wrapper.chmod(0o755)
    submit = ("sbatch", "--parsable", "--hold", f"--chdir={lab_dir / 'jobs'}", "-o", "/dev/null")
    results: dict[str, tuple[int, str]] = {}
    for role, (comment, args) in HELD.items():
        job_id = lab.run(
            [*submit, f"--comment={comment}", *args, "--wrap=sleep 1"], env, timeout_s=60
        ).strip()
        (out / f"scontrol-{role}.txt").write_text(
            lab.run(["scontrol", "show", "job", "-o", job_id], env, timeout_s=60)
        )
        proc = subprocess.run(
            ["bash", str(HOOK)],
            env={**env, "SLURM_JOB_ID": job_id, "GPUYIELD": str(wrapper), "GPUYIELD_DB": str(db)},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        results[role] = (proc.returncode, proc.stdout + proc.stderr)
        lab.run(["scancel", job_id], env, timeout_s=60)
    return results
