"""What real Slurm output looks like, field by field, as regular expressions.

Each pattern is checked against the real captures in /work/shared/data/slurm-local/ (so the patterns
describe what Slurm prints, not what the generator happens to write) and then against the generated
files.
"""

from __future__ import annotations

import re
from pathlib import Path

REAL = Path("/work/shared/data/slurm-local")

_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
_STATES = (
    "BOOT_FAIL|COMPLETED|DEADLINE|FAILED|NODE_FAIL|OUT_OF_MEMORY|PENDING|PREEMPTED|RUNNING|"
    "REQUEUED|TIMEOUT|CANCELLED by \\d+"
)
# Hostlists as sacct prints them: one host, or one bracketed range (the shapes both sides use).
_HOSTLIST = r"[a-z]+\d+|[a-z]+\[\d+-\d+\]"
_DURATION = r"(\d+-)?\d\d:\d\d:\d\d"

SACCT_FIELDS = {
    "JobID": r"\d+(_\d+)?",
    "JobIDRaw": r"\d+",
    "JobName": r"[\w.-]+",
    "User": r"[a-z][\w-]*",
    "Account": r"[a-z][\w-]*",
    "Partition": r"[a-z]+",
    "QOS": r"[a-z]+",
    "State": _STATES,
    "ExitCode": r"\d+:\d+",
    "Submit": _TIME,
    "Eligible": _TIME,
    "Start": f"{_TIME}|None|Unknown",
    "End": f"{_TIME}|Unknown",
    "ElapsedRaw": r"\d+",
    "TimelimitRaw": r"\d+|UNLIMITED|Partition_Limit",
    "AllocTRES": r"(billing=\d+,cpu=\d+,gres/gpu=\d+,mem=\d+[MGT],node=\d+)?",
    "NodeList": f"None assigned|{_HOSTLIST}",
    "NNodes": r"\d+",
    "Comment": r"(run=[\w.-]+)?",
    "Reason": r"[A-Za-z]+",
    "Cluster": r"[a-z0-9]+",
}

EVENT_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|Duration|"
    "Reason|User|TRES"
)
_NODE_TRES = r"billing=\d+,cpu=\d+,gres/gpu=\d+,mem=\d+M"
CLUSTER_EVENT = re.compile(
    rf"[a-z0-9]+\|(?:{_HOSTLIST})\|\|Cluster\|1\|\|0\|{_TIME}\|Unknown\|{_DURATION}\|"
    r"Cluster Registered TRES\|\|billing=\d+,cpu=\d+,energy=0,fs/disk=0,gres/gpu=(?P<gpus>\d+),"
    r"mem=\d+M,node=(?P<nodes>\d+),pages=0,vmem=0"
)
NODE_EVENT = re.compile(
    rf"[a-z0-9]+\|\|(?P<node>[a-z]+\d+)\|Node\|2\|(?P<state>DOWN|DOWN\*|DRAIN)\|(1|2049|514)\|"
    rf"(?P<start>{_TIME})\|(?P<end>{_TIME}|Unknown)\|{_DURATION}\|[^|]+\|"
    rf"(root\(0\)|slurm\(\d+\))\|{_NODE_TRES}"
)


def split_records(text: str, num_fields: int) -> list[list[str]]:
    """Records of a ``-P`` file, rejoining those a multi-line SubmitLine spread over lines."""
    records, pending = [], ""
    for line in text.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        if pending.count("|") + 1 >= num_fields:
            records.append(pending.split("|"))
            pending = ""
    assert not pending, "file ends inside a record"
    return records


def sacct_table(path: Path) -> list[dict[str, str]]:
    """Rows of a sacct -P file as dicts, keyed by the header's field names."""
    text = path.read_text()
    header = text.splitlines()[0].split("|")
    body = text[text.index("\n") + 1 :]
    return [dict(zip(header, r, strict=True)) for r in split_records(body, len(header))]


def bad_sacct_fields(row: dict[str, str]) -> list[str]:
    """Names of the fields (of SACCT_FIELDS) whose value does not look like Slurm's."""
    return [
        name
        for name, pattern in SACCT_FIELDS.items()
        if name in row and not re.fullmatch(pattern, row[name])
    ]


def node_keys(line: str) -> list[str]:
    """Keys of one ``scontrol -o show nodes`` line, in order (values may hold spaces)."""
    return re.findall(r"(?:^| )([A-Za-z_]+)=", line)
