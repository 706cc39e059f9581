"""`gpuyield whatif fit` and `gpuyield whatif` through the CLI: files, JSON, exit codes, HTML."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.simulate import load_scenario, simulate
from gpuyield.times import iso_utc
from tests.whatif.conftest import Simulated

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def fitted(base_cluster: Simulated, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("fit") / "fitted.toml"
    code, text = _run(
        "whatif",
        "fit",
        "--db",
        str(base_cluster.db),
        "--out",
        str(out),
        "--json",
        "--replay-seeds",
        "3",
    )
    assert code == 0, text
    return {"json": json.loads(text), "path": out}


def test_fit_writes_a_scenario_the_simulator_runs_as_is(fitted: dict) -> None:
    path: Path = fitted["path"]
    text = path.read_text()
    assert text.startswith("# Fitted by `gpuyield whatif fit`")
    assert "failures.hardware_total = " in text  # every parameter with its interval, as comments
    scenario = load_scenario(path)
    result = simulate(scenario)
    assert result.lineage[0].run == "pt" and result.jobs is not None and result.jobs.job_id.size
    code, out = _run("simulate", "run", str(path), "--out", str(path.parent / "sim"))
    assert code == 0, out


def test_fit_json_has_every_parameter_with_interval_evidence_and_the_check(fitted: dict) -> None:
    data = fitted["json"]
    assert data["check"]["passed"] is True and data["refusals"] == []
    keys = {p["key"] for p in data["parameters"]}
    assert {
        "failures.hardware_total",
        "failures.repair_mean_s",
        "lineage.pt.requeue_wait_s",
        "research.arrivals.8",
        "research.end_states.completed",
    } <= keys
    for p in data["parameters"]:
        low, high = p["interval"]
        assert low <= p["value"] <= high, p
        assert p["evidence"] and p["status"] in ("fitted", "setting", "assumed", "too-few-events")
    assert {c["category"] for c in data["check"]["categories"]} >= {"released", "idle", "down"}
    assert data["scenario"]["fleet"] == {"num_nodes": 64, "gpus_per_node": 8}
    # The evidence tables: down time by reason, the job mix per category, idle stretches.
    assert any(r["planned"] for r in data["evidence"]["down_by_reason"])
    assert {m["category"] for m in data["evidence"]["job_mix"]} >= {"released", "experiment"}


def test_a_short_window_is_refused_with_exit_3_naming_what_is_too_few(
    base_cluster: Simulated,
) -> None:
    start = base_cluster.scenario.start_s
    until = iso_utc(start + 86400).removesuffix("Z")
    since = iso_utc(start).removesuffix("Z")
    code, out = _run(
        "whatif", "fit", "--db", str(base_cluster.db), "--since", since, "--until", until
    )
    assert code == 3, out
    assert "too few events" in out and "failures.hardware_total" in out
    code, out = _run(
        "whatif",
        "--db",
        str(base_cluster.db),
        "--since",
        since,
        "--until",
        until,
        "--remedy",
        "drop-replicas",
    )
    assert code == 3 and "refused" in out and "--force" in out


def test_projection_json_has_the_issue_shape_with_dollars(base_cluster: Simulated) -> None:
    code, out = _run(
        "whatif",
        "--db",
        str(base_cluster.db),
        "--remedy",
        "drop-replicas",
        "--remedy",
        "checkpoint=20m",
        "--remedy",
        "drop-replicas+checkpoint=20m",
        "--seeds",
        "2",
        "--replay-seeds",
        "2",
        "--horizon",
        "5d",
        "--price-per-gpu-hour",
        "2.5",
        "--json",
    )
    assert code == 0, out
    data = json.loads(out)
    assert 0 < data["baseline"]["yield"] < 1 and data["horizon_days"] == 5
    assert set(data["remedies"]) == {
        "drop-replicas",
        "checkpoint=20m",
        "drop-replicas+checkpoint=20m",
    }
    for remedy in data["remedies"].values():
        low, high = remedy["yield_interval"]
        assert low <= remedy["yield"] <= high
        assert remedy["dollars_gained"] == pytest.approx(2.5 * remedy["gpu_hours_gained"])
        assert remedy["assumptions"]  # the costs it takes as given are stated
    drop = data["remedies"]["drop-replicas"]["assumptions"][0]
    assert "ft-costs.toml" in drop and re.search(r"stall [\d.]+ s", drop)
    assert data["ranking"][0] in data["remedies"] and data["price_source"] == "--price-per-gpu-hour"


def test_terminal_table_and_html_section(base_cluster: Simulated, tmp_path: Path) -> None:
    page = tmp_path / "whatif.html"
    code, out = _run(
        "whatif",
        "--db",
        str(base_cluster.db),
        "--remedy",
        "repair=2h",
        "--remedy",
        "ladder",
        "--seeds",
        "2",
        "--replay-seeds",
        "2",
        "--html",
        str(page),
    )
    assert code == 0, out
    assert "what each remedy buys on this cluster" in out and "repair=2h" in out
    assert "not applicable: ladder" in out
    html = page.read_text()
    assert "What each remedy buys on this cluster" in html
    keys = _data_keys(html)
    assert "baseline.yield" in keys and "remedies.repair=2h.yield_gain" in keys


def test_bad_remedies_say_what_to_write(tmp_path: Path) -> None:
    # Refused before any fit: the store named does not even exist.
    db = str(tmp_path / "never-written.duckdb")
    code, out = _run("whatif", "--db", db, "--remedy", "pray")
    assert code == 1 and "unknown remedy 'pray'" in out and "drop-replicas" in out
    code, out = _run("whatif", "--db", db, "--remedy", "drop-replicas+checkpoint=soon")
    assert code == 1 and "--remedy checkpoint= must be a duration" in out
    code, out = _run("whatif", "--db", db, "--remedy", "spares=many")
    assert code == 1 and "--remedy spares= must be a count" in out
    code, out = _run("whatif", "--db", db, "--horizon", "a while")
    assert code == 1 and "--horizon" in out
    assert not Path(db).exists()


def _data_keys(html: str) -> set[str]:
    keys: set[str] = set()

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            keys.update(v for k, v in attrs if k == "data-key" and v)

    Collect().feed(html)
    return keys
