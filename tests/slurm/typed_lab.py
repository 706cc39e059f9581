"""Typed GPUs on the real lab: an H100 + A100 fleet (typed-gres.sh), its workload, its capture.

Run by the session fixture after the lab's other phases (``conftest.lab_run``), and on its own to
record the fixtures under ``tests/ingest/fixtures/slurm-typed`` (as root, under the lab's lock)::

    flock /tmp/slurm-lab.lock python -m tests.slurm.typed_lab record tests/ingest/fixtures/slurm-typed

Every file is the output of one Slurm command, listed with its command in ``commands.tsv``.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.slurm import lab, oracle

OVERLAY = Path(__file__).with_name("typed-gres.sh")
WORKLOAD = Path(__file__).with_name("typed-workload.sh")
# What typed-gres.sh declares: node -> (GRES type, GPUs).
FLEET = {"n1": ("h100", 8), "n2": ("h100", 8), "n3": ("a100", 4), "n4": ("a100", 4)}
EVENT_FORMAT = (
    "Cluster,ClusterNodes,NodeName,Event,EventRaw,State,StateRaw,Start,End,"
    "Duration,Reason,User,TRES"
)
SACCT_FORMAT = (
    "JobIDRaw,JobID,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Start,End,"
    "ElapsedRaw,AllocTRES,ReqTRES,NodeList,NNodes,Comment"
)
MANIFEST = """# written by tests/slurm/typed_lab.py for the typed workload (tests/slurm/typed-workload.sh)
[[releases]]
model = "typed-chat-v1"
runs = ["pt-typed"]
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class TypedCapture:
    """What the typed phase left: the capture directory, job ids by role, the window."""

    capture: Path  # sacct-X-D.psv, events.psv, nodes.txt, gres.conf, ... (commands.tsv)
    job_ids: dict[str, str]  # role -> job id
    start_s: int  # after the typed fleet registered
    end_s: int


def run_typed_phase(lab_dir: Path, keep: Path) -> TypedCapture:
    """Apply the overlay, run the typed workload, capture (the live job still running)."""
    out = keep / "typed"
    out.mkdir()
    env = lab.lab_env(lab_dir)
    lab.run(["bash", str(OVERLAY)], env, timeout_s=180, log=out / "overlay.log")
    time.sleep(2)  # the registration of the typed fleet comes first in the window
    start_s = int(time.time())
    roles = out / "roles.tsv"
    lab.run(["bash", str(WORKLOAD), str(roles)], env, timeout_s=400, log=out / "workload.log")
    job_ids = {
        parts[1]: parts[2]
        for parts in (line.split("\t") for line in roles.read_text().splitlines())
        if parts[0] == "job"
    }
    time.sleep(2)  # slurmdbd writes the last job's end a moment after it leaves the queue
    end_s = int(time.time())
    capture(env, out, start_s, end_s)
    return TypedCapture(capture=out, job_ids=job_ids, start_s=start_s, end_s=end_s)


def capture(env: dict[str, str], out: Path, start_s: int, end_s: int) -> None:
    """Each command's output to its file, and the command to ``commands.tsv``."""
    window = ("-S", oracle.format_time(start_s), "-E", oracle.format_time(end_s))
    commands: dict[str, tuple[str, ...]] = {
        "sacct-X-D.psv": ("sacct", "-a", "-P", "-X", "-D", f"--format={SACCT_FORMAT}", *window),
        "sacct-steps.psv": ("sacct", "-a", "-P", f"--format={SACCT_FORMAT}", *window),
        "events.psv": ("sacctmgr", "-P", "show", "event", "All_Time", f"format={EVENT_FORMAT}"),
        "sacctmgr-tres.psv": ("sacctmgr", "-P", "show", "tres"),
        "nodes.txt": ("scontrol", "-o", "show", "nodes"),
        "nodes-block.txt": ("scontrol", "show", "nodes"),
        "sinfo.psv": ("sinfo", "-N", "-o", "%N|%P|%G"),
        "sinfo-gres-used.txt": (
            "sinfo", "-N", "-O", "NodeList:8,Partition:12,Gres:20,GresUsed:28,Features:14",
        ),
        "jobs-detail.txt": ("scontrol", "-d", "-o", "show", "job"),
    }  # fmt: skip
    lines = []
    for name, args in commands.items():
        (out / name).write_text(lab.run(list(args), env, timeout_s=60))
        lines.append(f"{name}\t{' '.join(args)}")
    shutil.copyfile("/etc/slurm/gres.conf", out / "gres.conf")
    lines.append("gres.conf\tcp /etc/slurm/gres.conf")
    slurm_conf = Path("/etc/slurm/slurm.conf").read_text().splitlines()
    wanted = ("NodeName=", "AccountingStorageTRES=", "GresTypes=", "PartitionName=")
    (out / "slurm.conf.excerpt").write_text(
        "\n".join(line for line in slurm_conf if line.startswith(wanted)) + "\n"
    )
    lines.append(
        "slurm.conf.excerpt\tgrep -E '^(NodeName|AccountingStorageTRES|GresTypes|PartitionName)=' /etc/slurm/slurm.conf"
    )
    (out / "manifest.toml").write_text(MANIFEST)
    (out / "commands.tsv").write_text("\n".join(lines) + "\n")
    (out / "window.txt").write_text(f"{oracle.format_time(start_s)}\n{oracle.format_time(end_s)}\n")


def record(target: Path) -> None:
    """Start a lab, make it typed, run the workload, capture into ``target``, stop the lab."""
    reason = lab.why_unavailable()
    if reason is not None:
        raise SystemExit(reason)
    keep = Path(lab.tempfile.mkdtemp(prefix="gpuyield-typed-"))
    with lab.machine_lock(), lab.running_lab(keep) as lab_dir:
        typed = run_typed_phase(lab_dir, keep)
    target.mkdir(parents=True, exist_ok=True)
    for item in typed.capture.iterdir():
        if item.name not in ("overlay.log", "workload.log"):
            shutil.copyfile(item, target / item.name)
    print(f"recorded {target} (artifacts in {keep})")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "record":
        raise SystemExit("usage: python -m tests.slurm.typed_lab record DIR")
    record(Path(sys.argv[2]))
