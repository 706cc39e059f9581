"""run_settings keys for estimating overhead and lost progress without telemetry (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuyield.errors import ManifestError
from gpuyield.manifest import Manifest, parse_manifest

PATH = Path("manifest.toml")


def test_run_settings_keys_parse_and_round_trip() -> None:
    manifest = parse_manifest(
        {
            "releases": [{"model": "m", "runs": ["pt"]}],
            "run_settings": {
                "pt": {
                    "checkpoint_interval_s": 600,
                    "checkpoint_save_s": 5,
                    "restart_s": 240,
                    "failure_detection_s": 0,
                }
            },
        },
        PATH,
    )
    assert manifest.checkpoint_save_s == {"pt": 5.0}
    assert manifest.restart_s == {"pt": 240.0}
    assert manifest.failure_detection_s == {"pt": 0.0}
    assert Manifest.from_dict(json.loads(json.dumps(manifest.to_dict()))) == manifest


@pytest.mark.parametrize(
    ("key", "value"),
    [("checkpoint_save_s", -1), ("restart_s", "5 min"), ("failure_detection_s", True)],
)
def test_bad_values_name_the_key(key: str, value: object) -> None:
    data = {"run_settings": {"pt": {key: value}}}
    with pytest.raises(ManifestError, match=f"run_settings.pt.{key}"):
        parse_manifest(data, PATH)


def test_unknown_key_lists_the_known_ones() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest({"run_settings": {"pt": {"restart": 5}}}, PATH)
    assert "restart_s" in (caught.value.hint or "")
