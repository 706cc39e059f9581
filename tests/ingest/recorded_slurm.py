"""A recorded Slurm for ``gpuyield collect`` and ``doctor`` tests that cannot start the real lab.

``sacct``, ``sacctmgr`` and ``scontrol`` are small shell scripts that print what the real lab printed
(``examples/slurm-lab/``; ``scontrol -d -o show job`` from ``fixtures/jobs-detail/``, a later
recording: its job ids are not the sacct recording's; Slurm 22.05.8) and log their arguments; ``down`` makes every one fail the
way a client does when slurmdbd is gone. The real lab runs the same code end to end in
tests/slurm/test_collect.py.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slurm-lab"
JOBS_DETAIL = Path(__file__).resolve().parent / "fixtures" / "jobs-detail"
CONFIG = """Configuration data as of 2026-11-30T11:00:00
AccountingStorageTRES   = cpu,mem,energy,node,billing,fs/disk,vmem,pages,gres/gpu
AccountingStoreFlags    = job_comment
ClusterName             = lab
"""
EMPTY_RESERVATIONS = "Cluster|Name|TimeStart|TimeEnd|Flags|NodeName\n"  # as 22.05 prints it


class RecordedSlurm:
    """Slurm clients in ``root/bin`` printing the files in ``root/out``."""

    def __init__(self, root: Path, *, config: str = CONFIG) -> None:
        self.bin = root / "bin"
        self.out = root / "out"
        self.calls = root / "calls.log"
        self.bin.mkdir(parents=True)
        self.out.mkdir(parents=True)
        self.set_sacct((EXAMPLES / "sacct-X-D-wide.psv").read_text())
        (self.out / "events").write_text((EXAMPLES / "sacctmgr-event-format.psv").read_text())
        (self.out / "nodes").write_text((EXAMPLES / "scontrol-show-nodes-oneliner.txt").read_text())
        (self.out / "reservations").write_text(EMPTY_RESERVATIONS)
        (self.out / "jobs").write_text((JOBS_DETAIL / "scontrol-d-o-show-job.txt").read_text())
        (self.out / "config").write_text(config)
        (self.out / "clusters").write_text("lab\n")
        for name, body in {
            "sacct": 'cat "$OUT/sacct"',
            "sacctmgr": 'case "$*" in *event*) cat "$OUT/events";; *reservation*) '
            'cat "$OUT/reservations";; *) cat "$OUT/clusters";; esac',
            "scontrol": 'case "$*" in *config*) cat "$OUT/config";; *job*) cat "$OUT/jobs";; '
            '*) cat "$OUT/nodes";; esac',
        }.items():
            script = self.bin / name
            script.write_text(
                "#!/bin/sh\n"
                f"OUT={shlex.quote(str(self.out))}\n"
                f'echo "{name} $*" >> {shlex.quote(str(self.calls))}\n'
                f'if [ -e "$OUT/down" ]; then echo "{name}: error: Problem talking to the '
                'database: Connection refused" >&2; exit 1; fi\n'
                f"{body}\n"
            )
            script.chmod(0o755)

    def set_sacct(self, text: str) -> None:
        """What sacct prints from now on."""
        (self.out / "sacct").write_text(text)

    def replay_sacct(self, recording: Path = EXAMPLES / "sacct-X-D-wide.psv") -> None:
        """From now on sacct prints ``recording`` as it stood at its ``-E`` (sacct_replay.py)."""
        script = Path(__file__).with_name("sacct_replay.py")
        (self.out / "sacct-replay").write_text(
            f"exec {shlex.quote(sys.executable)} {shlex.quote(str(script))} "
            f'{shlex.quote(str(recording))} "$@"\n'
        )
        sacct = self.bin / "sacct"
        sacct.write_text(sacct.read_text().replace('cat "$OUT/sacct"', '. "$OUT/sacct-replay"'))

    def script(self, name: str, body: str) -> None:
        """Replace client ``name`` by a shell script of its own (``$OUT`` is the output dir)."""
        path = self.bin / name
        path.write_text(f"#!/bin/sh\nOUT={shlex.quote(str(self.out))}\n{body}\n")
        path.chmod(0o755)

    def down(self, is_down: bool = True) -> None:
        """Every client fails from now on (or works again)."""
        marker = self.out / "down"
        if is_down:
            marker.touch()
        else:
            marker.unlink(missing_ok=True)

    def call_lines(self) -> list[str]:
        """Every call so far, ``name args...``."""
        return self.calls.read_text().splitlines() if self.calls.exists() else []
