"""The sacct parser fed garbage raises ParseError and nothing else, and leaves the store untouched."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuyield.errors import ParseError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.store import connect

HEADER = "JobID|JobIDRaw|State|Submit|Start|End|AllocTRES|NodeList|NNodes|ElapsedRaw"
GOOD = (
    "7|7|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T01:00:00|gres/gpu=8|n1|1|3600"
)

field_values = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "Unknown",
            "None",
            "",
            "UNLIMITED",
            "gres/gpu=",
            "n[1-",
            "9" * 40,
            "-5",
            "2026-13-45T99:99:99",
            "CANCELLED by 0",
            "gres/gpu=99999999999999999999",
        ]
    ),
)


def mutate_line(values: list[str], keep: int) -> str:
    return "|".join(values[:keep])


@st.composite
def garbage_files(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["fields", "bytes", "truncate", "count"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "truncate":
        text = f"{HEADER}\n{GOOD}\n"
        return text[: draw(st.integers(0, len(text)))].encode() + draw(st.binary(max_size=8))
    if kind == "count":
        n = draw(st.integers(1, 15))
        return f"{HEADER}\n{'|'.join(['7'] * n)}\n".encode()
    values = GOOD.split("|")
    index = draw(st.integers(0, len(values) - 1))
    values[index] = draw(field_values)
    return f"{HEADER}\n{'|'.join(values)}\n".encode("utf-8", "surrogatepass")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=garbage_files())
def test_garbage_raises_only_parse_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sacct.psv"
        path.write_bytes(data)
        con = connect(None)
        try:
            ingest_slurm(None, SlurmInputs(sacct=path), con=con)
        except ParseError as error:
            assert error.hint, "every parse error carries a hint"
            assert con.execute("SELECT count(*) FROM jobs").fetchall() == [(0,)]
            assert con.execute("SELECT count(*) FROM ingests").fetchall() == [(0,)]
        else:
            # Accepted input must have produced well-formed rows.
            bad = con.execute(
                "SELECT count(*) FROM jobs WHERE end_s < start_s OR num_gpus < 0"
            ).fetchall()
            assert bad == [(0,)]
        finally:
            con.close()


def test_nul_byte_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "sacct.psv"
    path.write_bytes(f"{HEADER}\n{GOOD}\n7|7\x00|x\n".encode())
    con = connect(None)
    try:
        ingest_slurm(None, SlurmInputs(sacct=path), con=con)
    except ParseError as error:
        assert error.line == 3 and "NUL" in error.message
    else:
        raise AssertionError("NUL byte accepted")


def test_latin1_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "sacct.psv"
    path.write_bytes(f"{HEADER}\n{GOOD}\n".encode() + "8|8|J\xe9r\xf4me\n".encode("latin-1"))
    con = connect(None)
    try:
        ingest_slurm(None, SlurmInputs(sacct=path), con=con)
    except ParseError as error:
        assert error.line == 3 and "iconv" in (error.hint or "")
    else:
        raise AssertionError("latin-1 accepted")
