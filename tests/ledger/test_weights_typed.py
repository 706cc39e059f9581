"""Weighted yield on the real typed-GPU capture (tests/ingest/fixtures/slurm-typed): the ledger by
GPU type, in H100-equivalents, FLOPs and dollars, each equal to a computation in this test from
the raw files (sacct, scontrol, the catalog's TOML), each conserved."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.summary import build_report, build_report_with_breakdown
from tests.conftest import REPO

TYPED = REPO / "tests" / "ingest" / "fixtures" / "slurm-typed"
CATALOG = REPO / "src" / "gpuyield" / "data" / "catalog" / "accelerators.toml"
PRICES = {"h100": 2.10, "a100": 1.15}
MANIFEST = """[[releases]]
model = "typed-chat-v1"
runs = ["pt-typed"]

[prices]
source = "test: a rate card"
basis = "list"
h100 = 2.10
"a100-sxm" = 1.15
"""
MODEL = {"h100": "h100-sxm", "a100": "a100-sxm"}


def _window(capture: Path = TYPED) -> tuple[int, int]:
    start, end = capture.joinpath("window.txt").read_text().split()
    return _epoch(start), _epoch(end)


def _epoch(text: str) -> int:
    from datetime import UTC, datetime

    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def _hosts(text: str) -> list[str]:
    """n[1,4] and n[2-3] (all this fixture prints)."""
    match = re.fullmatch(r"(\w+)\[([\d,-]+)\]", text)
    if match is None:
        return [text]
    names = []
    for part in match.group(2).split(","):
        low, _, high = part.partition("-")
        names += [f"{match.group(1)}{i}" for i in range(int(low), int(high or low) + 1)]
    return names


def expected_by_type(capture: Path = TYPED) -> dict[str, dict[str, float]]:
    """GPU-seconds per GRES type and category, from the raw files alone: each job's typed count
    from AllocTRES over its nodes of that type (scontrol's Gres), clipped to the window."""
    start_s, end_s = _window(capture)
    nodes = {}
    for line in capture.joinpath("nodes.txt").read_text().splitlines():
        name = re.search(r"NodeName=(\S+)", line).group(1)  # type: ignore[union-attr]
        gpu_type, count = re.search(r"Gres=gpu:(\w+):(\d+)", line).groups()  # type: ignore[union-attr]
        nodes[name] = (gpu_type, int(count))
    out = {t: {"installed": 0.0} for t, _ in nodes.values()}
    for gpu_type, count in nodes.values():
        out[gpu_type]["installed"] += count * (end_s - start_s)
    rows = capture.joinpath("sacct-X-D.psv").read_text().splitlines()
    header = rows[0].split("|")
    for row in rows[1:]:
        job = dict(zip(header, row.split("|"), strict=True))
        begin = max(_epoch(job["Start"]), start_s)
        finish = min(end_s if job["End"] == "Unknown" else _epoch(job["End"]), end_s)
        typed = dict(re.findall(r"gres/gpu:(\w+)=(\d+)", job["AllocTRES"]))
        held = _hosts(job["NodeList"])
        state = job["State"].split()[0]
        category = {"FAILED": "failed", "CANCELLED": "cancelled"}.get(state) or (
            "released" if job["Comment"] == "run=pt-typed" else "experiment"
        )
        for gpu_type, count in typed.items():
            on_type = [n for n in held if nodes[n][0] == gpu_type]
            assert on_type, f"job {job['JobID']} holds {gpu_type} on none of its nodes"
            cats = out[gpu_type]
            cats[category] = cats.get(category, 0.0) + int(count) * (finish - begin)
    for cats in out.values():
        cats["idle"] = cats["installed"] - sum(v for k, v in cats.items() if k != "installed")
    return out


@pytest.fixture(scope="module")
def typed_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("typed")
    manifest = tmp / "manifest.toml"
    manifest.write_text(MANIFEST)
    start, end = TYPED.joinpath("window.txt").read_text().split()
    db = tmp / "typed.duckdb"
    ingest_slurm(
        db,
        SlurmInputs(
            sacct=TYPED / "sacct-X-D.psv",
            events=TYPED / "events.psv",
            nodes=TYPED / "nodes.txt",
            manifest=manifest,
        ),
        since_s=_epoch(start),
        until_s=_epoch(end),
    )
    return db


@pytest.fixture(scope="module")
def typed_report(typed_db: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(build_report(typed_db).to_dict()))
    return data


def test_categories_by_gpu_type_equal_the_raw_files(typed_report: dict[str, Any]) -> None:
    expected = expected_by_type()
    by_type = typed_report["by_gpu_type"]
    assert set(by_type) == {MODEL[t] for t in expected}
    for gres_type, cats in expected.items():
        got = by_type[MODEL[gres_type]]
        assert got["slurm_types"] == [gres_type]
        assert got["installed_gpu_seconds"] == pytest.approx(cats["installed"], abs=1e-6)
        for category, value in got["categories"].items():
            assert value == pytest.approx(cats.get(category, 0.0), abs=1e-6), (gres_type, category)
    # The uneven job (--gpus=12 on an 8-GPU H100 node and a 4-GPU A100 node) is 8 + 4, so the
    # A100 nodes never hold more than they have (the ledger refuses that), and each type adds up.
    for name in ("installed_gpu_seconds",):
        assert sum(t[name] for t in by_type.values()) == pytest.approx(typed_report[name])
    for category, value in typed_report["categories"].items():
        assert sum(t["categories"][category] for t in by_type.values()) == pytest.approx(value)


def test_weights_come_from_the_catalog_and_each_conserves(typed_report: dict[str, Any]) -> None:
    catalog = {a["id"]: a for a in tomllib.loads(CATALOG.read_text())["accelerator"]}
    peak = {t: catalog[MODEL[t]]["peak_tflops_bf16"] for t in MODEL}
    reference = catalog["h100-sxm"]["peak_tflops_bf16"]
    expected = expected_by_type()
    weighted = typed_report["weighted"]
    units = {
        "h100_equiv_seconds": {t: peak[t] / reference for t in MODEL},
        "flops": {t: peak[t] * 1e12 for t in MODEL},
        "dollars": {t: PRICES[t] / 3600 for t in MODEL},
    }
    for unit, weight in units.items():
        block = weighted[unit]
        want_installed = sum(expected[t]["installed"] * weight[t] for t in MODEL)
        assert block["installed"] == pytest.approx(want_installed, rel=1e-12)
        for category, value in block["categories"].items():
            want = sum(expected[t].get(category, 0.0) * weight[t] for t in MODEL)
            assert value == pytest.approx(want, rel=1e-12, abs=1e-9), (unit, category)
        assert sum(block["categories"].values()) == pytest.approx(block["installed"], rel=1e-12)
        assert block["not_weighted_gpu_seconds"] == {}
        released = sum(expected[t].get("released", 0.0) * weight[t] for t in MODEL)
        assert block["yield"] == pytest.approx(released / want_installed, rel=1e-12)
    # The weights and prices used are stated beside the numbers.
    assert weighted["h100_equiv_seconds"]["weights"] == pytest.approx(
        {MODEL[t]: peak[t] / reference for t in MODEL}
    )
    assert weighted["dollars"]["weights"]["h100-sxm"] == [
        {"usd_per_gpu_hour": 2.10, "source": "prices 'h100'"}
    ]
    assert weighted["dollars"]["weights"]["a100-sxm"][0]["source"] == "prices 'a100-sxm'"
    assert "test: a rate card" in weighted["dollars"]["basis"]
    assert typed_report["by_gpu_type"]["a100-sxm"]["h100_equiv"] == pytest.approx(312 / 989.4)


def test_flop_yield_differs_from_gpu_second_yield_on_a_mixed_fleet(
    typed_report: dict[str, Any],
) -> None:
    # The released run ran on H100s only, so FLOP yield is above GPU-second yield.
    assert typed_report["weighted"]["flops"]["yield"] > typed_report["yield"] > 0


def test_breakdown_in_dollars_adds_up_to_the_weighted_total(typed_db: Path) -> None:
    result = build_report_with_breakdown(typed_db, by="run", weight="dollars", top=0)
    cut = result.breakdown
    assert cut is not None and cut.unit == "dollars"
    dollars = result.report.fleet.weighted["dollars"]  # type: ignore[union-attr]
    assert dollars is not None
    total = sum(r.total_gpu_seconds for r in cut.rows)
    assert total == pytest.approx(dollars.installed, rel=1e-12)
    expected = expected_by_type()
    rows = {r.key: r for r in cut.rows}
    # span: 2 H100 + 2 A100 for 5 s; uneven: 8 H100 + 4 A100 for 5 s (raw files).
    assert rows["span"].categories["experiment"] == pytest.approx(
        5 * (2 * PRICES["h100"] + 2 * PRICES["a100"]) / 3600, rel=1e-12
    )
    assert rows["uneven"].categories["experiment"] == pytest.approx(
        5 * (8 * PRICES["h100"] + 4 * PRICES["a100"]) / 3600, rel=1e-12
    )
    idle = sum(expected[t]["idle"] * PRICES[t] / 3600 for t in MODEL)
    assert rows["(not allocated)"].categories["idle"] == pytest.approx(idle, rel=1e-12)
