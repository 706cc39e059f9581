"""The manifest's [[families]] and [ladder]: parsing, validation, the rung rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuyield.errors import ManifestError
from gpuyield.families import DEFAULT_RUNGS, LadderPolicy, glob_regex
from gpuyield.manifest import Manifest, empty_manifest, parse_manifest

PATH = Path("m.toml")


def test_families_and_ladder_parse_and_survive_the_store() -> None:
    manifest = parse_manifest(
        {
            "families": [
                {"name": "llama-arch-v3", "runs": "llama3-*"},
                {"name": "moe", "runs": ["re:moe-(small|big)-\\d+", "moe?x"]},
            ],
            "ladder": {"rungs": [1, 8, 64, 512], "within_days": 14},
        },
        PATH,
    )
    assert [f.name for f in manifest.families] == ["llama-arch-v3", "moe"]
    assert manifest.ladder == LadderPolicy(rungs=(1, 8, 64, 512), within_days=14.0)
    assert Manifest.from_dict(json.loads(json.dumps(manifest.to_dict()))) == manifest
    moe = manifest.families[1]
    assert moe.matches("moe-big-12") and moe.matches("moe7x")
    assert not moe.matches("moe-big-12x") and not moe.matches("xmoe-small-1")


def test_no_families_no_ladder_and_old_stored_documents_read() -> None:
    assert empty_manifest().ladder is None
    old = json.dumps(empty_manifest().to_dict()).replace(', "families": [], "ladder": null', "")
    assert "families" not in old
    assert Manifest.from_dict(json.loads(old)) == empty_manifest()


def test_families_alone_turn_on_the_default_ladder() -> None:
    manifest = parse_manifest({"families": [{"name": "f", "runs": "f-*"}]}, PATH)
    assert manifest.ladder == LadderPolicy(rungs=DEFAULT_RUNGS)


@pytest.mark.parametrize(
    ("glob", "yes", "no"),
    [
        ("llama3-*", ["llama3-", "llama3-8b-run2"], ["llama3", "xllama3-a"]),
        ("r?n", ["run", "ran"], ["rn", "ruun"]),
        ("exp[0-9]", ["exp3"], ["expa", "exp10"]),
        ("exp[!0-9]", ["expa"], ["exp3"]),
        ("a.b+c", ["a.b+c"], ["aXb+c", "a.bbc"]),
    ],
)
def test_globs_match_whole_run_names(glob: str, yes: list[str], no: list[str]) -> None:
    pattern = glob_regex(glob)
    assert all(re.fullmatch(pattern, s) for s in yes)
    assert not any(re.fullmatch(pattern, s) for s in no)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"families": {"name": "x"}}, "families must be an array"),
        ({"families": [{"runs": "x*"}]}, "families[0].name"),
        ({"families": [{"name": "a b", "runs": "x*"}]}, "families[0].name"),
        ({"families": [{"name": "a"}]}, "families[0].runs"),
        ({"families": [{"name": "a", "runs": []}]}, "families[0].runs"),
        ({"families": [{"name": "a", "runs": "re:(unclosed"}]}, "not a valid regex"),
        ({"families": [{"name": "a", "runs": "a*", "rung": 1}]}, "unknown key 'rung'"),
        (
            {"families": [{"name": "a", "runs": "a*"}, {"name": "a", "runs": "b*"}]},
            "declared twice",
        ),
        ({"ladder": {"rungs": [8, 1]}}, "ladder.rungs must be increasing"),
        ({"ladder": {"rungs": [1, 1]}}, "ladder.rungs must be increasing"),
        ({"ladder": {"rungs": [0, 8]}}, "ladder.rungs must be increasing"),
        ({"ladder": {"rungs": [1, 8.5]}}, "ladder.rungs must be increasing"),
        ({"ladder": {"rungs": []}}, "ladder.rungs must be increasing"),
        ({"ladder": {"within_days": 0}}, "ladder.within_days"),
        ({"ladder": {"within_days": True}}, "ladder.within_days"),
        ({"ladder": {"rung": [1]}}, "unknown key 'rung'"),
        ({"ladder": [1, 8]}, "ladder must be a table"),
    ],
)
def test_bad_families_and_ladders_name_the_key(data: dict, says: str) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data, PATH)
    assert says in caught.value.message
    assert caught.value.message.startswith("m.toml: ")


def test_rungs_a_run_sits_on_and_needs() -> None:
    policy = LadderPolicy(rungs=(1, 8, 64, 512))
    # (GPUs, rung label, GPUs of the completed run needed first)
    cases = [(1, "1", None), (2, "8", 1), (8, "8", 1), (9, "64", 8), (64, "64", 8),
             (100, "512", 64), (512, "512", 64), (1024, "past 512", 512)]  # fmt: skip
    for gpus, label, required in cases:
        assert policy.rung_label(gpus) == label
        assert policy.required_gpus(gpus) == required
    assert policy.missing_rungs(512, 8) == (64,)
    assert policy.missing_rungs(512, None) == (1, 8, 64)
    assert policy.missing_rungs(8, 1) == ()
    assert policy.within_s == 30 * 86400
