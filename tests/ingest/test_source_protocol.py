"""One Source shape, in code: every registered source has the protocol's steps, and the registry,
``collect``, ``doctor`` and the CLI's ``ingest`` commands agree on the list of sources."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer.main

from gpuyield.cli import ingest as ingest_cli
from gpuyield.cli._fields import FLAGS
from gpuyield.ingest.collect_commands import slurm_commands
from gpuyield.ingest.doctor import Status, run_doctor
from gpuyield.ingest.slurm import DIR_FILES, SlurmInputs
from gpuyield.ingest.source import Source
from gpuyield.ingest.sources import SLURM_FILES, SOURCES, slurm_clients


def _options(command: object) -> set[str]:
    return {name for p in getattr(command, "params", ()) for name in getattr(p, "opts", ())}


def _ingest_commands() -> dict[str, object]:
    commands = getattr(typer.main.get_command(ingest_cli.app), "commands", {})
    assert commands, "gpuyield ingest has commands"
    return dict(commands)


def test_every_registered_source_satisfies_the_protocol() -> None:
    assert SOURCES, "the registry lists the sources"
    for source in SOURCES:
        assert isinstance(source, Source), f"{source!r} lacks a step of Source"
        for step in ("read", "stage", "load"):
            assert callable(getattr(source, step))
    kinds = [s.kind for s in SOURCES]
    assert len(set(kinds)) == len(kinds), kinds
    assert len({s.input_field for s in SOURCES}) == len(SOURCES)
    assert set(SLURM_FILES) <= set(SOURCES)


def test_an_object_without_the_steps_is_not_a_source() -> None:
    @dataclasses.dataclass(frozen=True)
    class Half:
        kind: str = "half"
        input_field: str = "half.path"
        latest_only: bool = True

        def read(self, run: object, info: object) -> object:
            return info

    assert not isinstance(Half(), Source)


def test_the_slurm_inputs_and_a_directory_are_the_registry_s_files(tmp_path: Path) -> None:
    fields = {f.name for f in dataclasses.fields(SlurmInputs)}
    assert fields == {s.name for s in SLURM_FILES} | {"telemetry"}
    for source in SLURM_FILES:
        (tmp_path / source.dir_file).write_text("")
    found = SlurmInputs.from_dir(tmp_path)
    for source in SLURM_FILES:
        assert getattr(found, source.name) == tmp_path / source.dir_file
    assert set(DIR_FILES.values()) == {s.dir_file for s in SLURM_FILES}


def test_the_cli_has_a_flag_or_a_command_for_every_source() -> None:
    commands = _ingest_commands()
    slurm_flags = _options(commands["slurm"])
    for source in SLURM_FILES:
        assert FLAGS[source.input_field] in slurm_flags, source.name
    others = [s for s in SOURCES if s not in SLURM_FILES]
    for source in others:
        command = source.input_field.split(".")[0].replace("_", "-")
        assert command in commands, f"no `gpuyield ingest {command}` for {source.kind}"
        flag = FLAGS.get(source.input_field)
        if flag is not None:
            assert flag in _options(commands[command]), source.input_field
    # and no ingest command without a source
    named = {"slurm"} | {s.input_field.split(".")[0].replace("_", "-") for s in others}
    assert set(commands) == named


def test_collect_runs_one_command_per_file_a_slurm_client_prints() -> None:
    binaries = {name: f"/bin/{name}" for name in slurm_clients()}
    commands = slurm_commands(binaries, cluster="c", start_s=0, end_s=3600)
    printed = [s for s in SLURM_FILES if s.client is not None]
    assert {c.file for c in commands} == {s.dir_file for s in printed}
    by_file = {s.dir_file: s for s in printed}
    for command in commands:
        source = by_file[command.file]
        assert command.argv[0] == f"/bin/{source.client}"
        # The kind is the `ingest slurm` flag the file would be given with.
        assert f"--{command.kind}" == FLAGS[source.input_field]
    assert set(slurm_clients()) == {s.client for s in printed}


def test_doctor_looks_for_the_clients_the_sources_need(tmp_path: Path) -> None:
    report = run_doctor(slurm_bin=tmp_path)  # an empty directory: none found
    check = next(c for c in report.checks if c.name == "Slurm commands")
    assert check.status is Status.SKIPPED
    assert check.detail == "not found: " + ", ".join(slurm_clients())


def test_the_cli_names_the_clients_the_sources_need() -> None:
    from gpuyield.cli import app

    commands = getattr(typer.main.get_command(app), "commands", {})
    for name in ("collect", "doctor"):
        option = next(p for p in commands[name].params if "--slurm-bin" in p.opts)
        assert f"Directory of {', '.join(slurm_clients())}." in (option.help or ""), name
