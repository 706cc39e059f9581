"""The example hooks in examples/ladder: the prolog/CI script against a real store, the manifest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpuyield.manifest import load_manifest
from tests.conftest import REPO
from tests.ladder.conftest import LadderStore

EXAMPLES = REPO / "examples" / "ladder"
AT = "2026-01-01T04:00:00"


def _hook(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    wrapper = tmp_path / "gpuyield"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m gpuyield "$@"\n')
    wrapper.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GPUYIELD", "SLURM_"))}
    return subprocess.run(
        ["bash", str(EXAMPLES / "preflight-prolog.sh")],
        env={**clean, "GPUYIELD": str(wrapper), "GPUYIELD_AT": AT, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_prolog_script_in_ci_mode(ladder_store: LadderStore, tmp_path: Path) -> None:
    db = str(ladder_store.db)
    refused = _hook(tmp_path, GPUYIELD_DB=db, GPUYIELD_GPUS="16", GPUYIELD_FAMILY="jump")
    assert refused.returncode == 3 and "missing rung(s) 1, 8" in refused.stderr
    allowed = _hook(tmp_path, GPUYIELD_DB=db, GPUYIELD_GPUS="16", GPUYIELD_RUN="climb-next")
    assert allowed.returncode == 0 and "may launch" in allowed.stdout
    untagged = _hook(tmp_path, GPUYIELD_DB=db, GPUYIELD_GPUS="16")
    assert untagged.returncode == 0 and not untagged.stdout


def test_a_broken_check_follows_on_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.duckdb")
    asks = {"GPUYIELD_DB": missing, "GPUYIELD_GPUS": "16", "GPUYIELD_FAMILY": "jump"}
    allowed = _hook(tmp_path, **asks)
    assert allowed.returncode == 0 and "GPUYIELD_ON_ERROR=allow" in allowed.stderr
    refused = _hook(tmp_path, **asks, GPUYIELD_ON_ERROR="refuse")
    assert refused.returncode == 1 and "no database at" in refused.stderr


def test_example_manifest_parses() -> None:
    manifest = load_manifest(EXAMPLES / "manifest.toml")
    assert manifest.ladder is not None and manifest.ladder.rungs == (1, 8, 64, 512)
    moe = next(f for f in manifest.families if f.name == "moe-router")
    assert moe.matches("moe-big-3") and moe.matches("router-x") and not moe.matches("moe-huge-1")
