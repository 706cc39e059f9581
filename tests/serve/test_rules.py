"""Every alerting and recording rule in examples/prometheus is unit-tested by `promtool test rules`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.serve.prom import EXAMPLES, RULE_FILES, find_tool


def _promtool(*args: str, cwd: Path = EXAMPLES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [find_tool("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _rules() -> list[dict[str, object]]:
    return [
        rule
        for name in RULE_FILES
        for group in yaml.safe_load((EXAMPLES / name).read_text())["groups"]
        for rule in group["rules"]
    ]


def test_config_and_rules_are_valid() -> None:
    checked = _promtool("check", "config", "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_unit_tests_pass() -> None:
    result = _promtool("test", "rules", "gpuyield-tests.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_rule_has_cases_that_fire_and_cases_that_do_not() -> None:
    tests = yaml.safe_load((EXAMPLES / "gpuyield-tests.yml").read_text())["tests"]
    fired: set[str] = set()
    silent: set[str] = set()
    checked_records: set[str] = set()
    for case in tests:
        for alert in case.get("alert_rule_test", []):
            (fired if alert["exp_alerts"] else silent).add(alert["alertname"])
        for expr in case.get("promql_expr_test", []):
            checked_records.add(expr["expr"])
    alerts = {str(r["alert"]) for r in _rules() if "alert" in r}
    records = {str(r["record"]) for r in _rules() if "record" in r}
    assert len(alerts) == 6 and len(records) == 5
    assert alerts == fired == silent
    assert records <= checked_records


@pytest.mark.parametrize(
    ("rule", "broken"),
    [
        # Without the waiting-jobs condition the "quiet" cluster would page someone.
        ("gpuyield_idle_gpus > 8 and on (cluster) gpuyield_pending_gpus > 0", "gpuyield_idle_gpus > 8"),
        ("gpuyield_yield_ratio{window=\"7d\"} < 0.15", "gpuyield_yield_ratio < 0.15"),
        ("gpuyield_node_down_duration_seconds > 86400", "gpuyield_node_down_duration_seconds > 3600"),
        ("sum by (cluster, account) (gpuyield_account_gpu_seconds_total{category!=\"released\"})",
         "sum by (cluster, account) (gpuyield_account_gpu_seconds_total)"),
    ],
)  # fmt: skip
def test_the_unit_tests_catch_a_broken_rule(rule: str, broken: str, tmp_path: Path) -> None:
    """A rule that fires too often (or sums the wrong thing) fails promtool's tests."""
    for name in (*RULE_FILES, "gpuyield-tests.yml"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    target = next(tmp_path / n for n in RULE_FILES if rule in (EXAMPLES / n).read_text())
    target.write_text(target.read_text().replace(rule, broken))
    result = _promtool("test", "rules", "gpuyield-tests.yml", cwd=tmp_path)
    assert result.returncode != 0, result.stdout
