"""The ladder workload on the real lab: one family climbs 1 -> 8 -> 16 GPUs, one jumps to 16 and fails.

Run by the session fixture after the lab's other phases (``conftest.lab_run``), on the lab
restarted with four 8-GPU nodes. n3 is left out: the resize phase put it in a MAINT reservation.
The climbing family is named by the manifest's pattern (``ladder-climb-*``); the jumping one by
its own comment (``family=yolo``), so both ways of naming a family meet real sacct output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tests.slurm import lab, oracle

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
    return LadderCapture(capture=out, job_ids=job_ids, end_s=end_s)
