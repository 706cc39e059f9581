"""Which GPU model each node holds (manifest, DCGM, gres.conf, GRES type, features), what its
GPU-hour costs, and what is refused: unknown models named, never guessed."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpuyield.errors import DataConsistencyError, ManifestError
from gpuyield.fleet import parse_gpu_models, parse_prices
from gpuyield.ingest.gpu_models import ingest_gres_conf, read_gres_conf
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.ledger.weights import resolve_name
from gpuyield.report.summary import build_report
from tests.conftest import REPO

TYPED = REPO / "tests" / "ingest" / "fixtures" / "slurm-typed"
SAMPLE = REPO / "examples" / "slurm-lab"
WINDOW = ("2026-12-02T05:00:24", "2026-12-02T05:00:53")


def _epoch(text: str) -> int:
    from datetime import UTC, datetime

    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def _typed_db(
    tmp_path: Path, manifest: str, nodes: Path | None = None, sacct: Path | None = None
) -> Path:
    path = tmp_path / "manifest.toml"
    path.write_text(manifest)
    db = tmp_path / "t.duckdb"
    inputs = SlurmInputs(
        sacct=sacct or TYPED / "sacct-X-D.psv",
        events=TYPED / "events.psv",
        nodes=nodes or TYPED / "nodes.txt",
        manifest=path,
    )
    ingest_slurm(db, inputs, since_s=_epoch(WINDOW[0]), until_s=_epoch(WINDOW[1]))
    return db


def _report(db: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(build_report(db).to_dict()))
    return data


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # DCGM's modelName (NVML)
        ("nvidia_h100_80gb_hbm3", "h100-sxm"),  # Slurm's AutoDetect=nvml type of the same GPU
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("nvidia_a100-sxm4-80gb", "a100-sxm"),
        ("h100", "h100-sxm"),  # the catalog's alias: the SXM part (docs/weights.md)
        ("A100", "a100-sxm"),
        ("NVIDIA B200", "b200"),
    ],
)
def test_names_as_clusters_print_them(name: str, model: str) -> None:
    match = resolve_name(name)
    assert match.accelerator is not None and match.accelerator.id == model


@pytest.mark.parametrize(
    "name", ["rtx6000", "NVIDIA A100-SXM4-40GB, MIG 1g.5gb", "tesla_t4", "", "gpu"]
)
def test_names_not_in_the_catalog_are_not_guessed(name: str) -> None:
    match = resolve_name(name)
    assert match.accelerator is None and match.how


def test_an_unknown_gres_type_is_named_and_not_weighted(tmp_path: Path) -> None:
    # The same capture with the A100s renamed to a type the catalog lacks, in both files.
    renamed = {}
    for name in ("nodes.txt", "sacct-X-D.psv"):
        text = (TYPED / name).read_text().replace("a100", "rtx6000").replace("sxm4", "ada")
        renamed[name] = tmp_path / name
        renamed[name].write_text(text)
    manifest = '[prices]\nsource = "t"\nh100 = 2\n'
    report = _report(_typed_db(tmp_path, manifest, renamed["nodes.txt"], renamed["sacct-X-D.psv"]))
    unknown = report["by_gpu_type"]["rtx6000"]
    assert unknown["model"] is None and unknown["h100_equiv"] is None
    assert unknown["installed_gpu_seconds"] == 2 * 4 * 29
    for unit in ("h100_equiv_seconds", "flops", "dollars"):
        assert report["weighted"][unit]["not_weighted_gpu_seconds"] == {"rtx6000": 2 * 4 * 29}
        block = report["weighted"][unit]
        assert sum(block["categories"].values()) == pytest.approx(block["installed"])
    assert any("GRES type 'rtx6000' is not in the catalog" in w for w in report["warnings"])


def test_gres_conf_and_dcgm_outrank_the_gres_type(tmp_path: Path) -> None:
    db = _typed_db(tmp_path, "")
    gres = tmp_path / "gres.conf"
    gres.write_text(
        "AutoDetect=off\n"
        "NodeName=n[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-7]\n"
        "NodeName=n[3-4] Name=gpu Type=nvidia_h100_80gb_hbm3 \\\n  File=/dev/nvidia[0-3]\n"
    )
    assert ingest_gres_conf(db, gres).rows_read == 4
    response = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {
                        "__name__": "DCGM_FI_DEV_GPU_UTIL",
                        "Hostname": "n1.cluster.local",
                        "gpu": "0",
                        "modelName": "NVIDIA H100 PCIe",
                    },
                    "values": [[_epoch(WINDOW[0]) + 5, "90"]],
                }
            ],
        },
    }
    samples = tmp_path / "dcgm.json"
    samples.write_text(json.dumps(response))
    ingest_utilization(db, prom_json=[samples])
    report = _report(db)
    types = report["by_gpu_type"]
    assert types["h100-pcie"]["nodes"] == 1  # n1: DCGM says PCIe
    assert "DCGM modelName" in types["h100-pcie"]["model_source"][0]
    assert types["h100-sxm"]["nodes"] == 3  # n2 by GRES type, n3-n4 by gres.conf
    assert "a100-sxm" not in types
    assert any("n1: gres.conf Type 'h100' says h100-sxm" in w for w in report["warnings"])
    assert any("n3: GRES type 'a100' says a100-sxm" in w for w in report["warnings"])


def test_manifest_models_for_an_untyped_cluster_and_one_price(tmp_path: Path) -> None:
    # The sample's manifest says its untyped lab nodes stand for H100s at $2 per GPU-hour.
    manifest = (SAMPLE / "manifest.toml").read_text()
    assert '[[gpu_models]]\nnodes = "n[1-4]"\nmodel = "h100-sxm"' in manifest
    assert '"h100-sxm" = 2.0' in manifest
    (tmp_path / "manifest.toml").write_text(manifest)
    db = tmp_path / "s.duckdb"
    inputs = SlurmInputs(
        sacct=SAMPLE / "sacct-X-D-wide.psv",
        events=SAMPLE / "sacctmgr-event-format.psv",
        nodes=SAMPLE / "scontrol-show-nodes-oneliner.txt",
        manifest=tmp_path / "manifest.toml",
    )
    ingest_slurm(
        db, inputs, since_s=_epoch("2026-11-30T10:26:27"), until_s=_epoch("2026-11-30T11:00:11")
    )
    report = _report(db)
    assert list(report["by_gpu_type"]) == ["h100-sxm"]
    dollars = report["weighted"]["dollars"]
    # One model, one price: dollars are GPU-hours x price, category by category.
    assert dollars["installed"] == pytest.approx(
        report["installed_gpu_seconds"] / 3600 * 2.0, rel=1e-12
    )
    for category, gpu_s in report["categories"].items():
        assert dollars["categories"][category] == pytest.approx(
            gpu_s / 3600 * 2.0, rel=1e-12, abs=1e-12
        )
    assert report["weighted"]["h100_equiv_seconds"]["categories"] == pytest.approx(
        report["categories"]
    )


def test_a_manifest_model_not_in_the_catalog_is_refused_at_ingest(tmp_path: Path) -> None:
    with pytest.raises(
        ManifestError, match=r"gpu_models\[0\]\.model 'h1000' is not in the catalog"
    ):
        _typed_db(tmp_path, '[[gpu_models]]\nnodes = "n1"\nmodel = "h1000"\n')


def test_partition_prices_and_a_node_priced_twice(tmp_path: Path) -> None:
    manifest = (
        '[prices]\nsource = "card"\nh100 = 2.0\na100 = 1.0\n'
        '[prices.partitions.urgent]\nh100 = 3.0\nsource = "premium"\n'
    )
    report = _report(_typed_db(tmp_path, manifest))
    assert report["by_gpu_type"]["h100-sxm"]["prices"][0]["usd_per_gpu_hour"] == 3.0
    assert (
        report["by_gpu_type"]["h100-sxm"]["prices"][0]["source"]
        == "prices.partitions.urgent 'h100'"
    )
    assert report["by_gpu_type"]["a100-sxm"]["prices"][0]["usd_per_gpu_hour"] == 1.0
    twice = manifest + "[prices.partitions.gpu]\nh100 = 2.5\n"
    other = tmp_path / "again"
    other.mkdir()
    with pytest.raises(DataConsistencyError, match="n1 is in partitions priced differently"):
        build_report(_typed_db(other, twice))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('source = "x"\nh100 = -1', "between 0 and 1000"),
        ('source = "x"\nh100 = inf', "between 0 and 1000"),
        ('source = "x"\nh100 = "2"', "between 0 and 1000"),
        ("h100 = 2", "prices.source must say where the prices come from"),
        ('source = "x"\nbasis = "spot"\nh100 = 2', "prices.basis must be one of"),
        ('source = "x"', "names no price"),
    ],
)
def test_bad_prices_are_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        parse_prices(tomllib.loads(text), Path("m.toml"))


def test_a_node_given_two_models_is_refused() -> None:
    rules = [{"nodes": "n[1-4]", "model": "h100-sxm"}, {"nodes": "n4", "model": "a100"}]
    with pytest.raises(ManifestError, match=r"gpu_models\[1\] gives n4 model 'a100'"):
        parse_gpu_models(rules, Path("m.toml"))


def test_gres_conf_lines(tmp_path: Path) -> None:
    path = tmp_path / "gres.conf"
    path.write_text("# a comment\nAutoDetect=nvml\nName=gpu Type=h100 File=/dev/nvidia0\n")
    with pytest.raises(Exception, match="Type= without NodeName="):
        read_gres_conf(path)
    path.write_text(
        "NodeName=g[01-02] Name=gpu File=/dev/nvidia[0-3]\nNodeName=g03 Name=gpu Type=a100 Count=4\n"
    )
    assert [(n.node, n.name, n.line) for n in read_gres_conf(path)] == [("g03", "a100", 2)]
