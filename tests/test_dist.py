"""Install as written (issue 25): ``make dist`` builds a wheel and an sdist; the wheel installs into
a fresh virtual environment and runs the README's session on the bundled sample.

Offline, as every test: the build runs without isolation (the backend is in the dev extra), and
the fresh environment borrows this one's installed dependencies through a ``.pth`` file, so pip
resolves the wheel's requirements (``[serve]`` included) with ``--no-index``. What is imported and
run is the wheel's copy, not the checkout (checked).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.docs.snippets import REPO, blocks, gpuyield_commands, session

pytestmark = pytest.mark.slow

SAMPLE = REPO / "examples" / "slurm-lab"
SAMPLE_AS = {  # the names the README's session gives the sample's files
    "sacct-X-D-wide.psv": "sacct.psv",
    "sacctmgr-event-format.psv": "events.psv",
    "scontrol-show-nodes-oneliner.txt": "nodes.txt",
    "manifest.toml": "manifest.toml",
}


def _run(args: list[str | Path], **kwargs: object) -> str:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900,
                          check=False, **kwargs)  # type: ignore[call-overload]  # fmt: skip
    assert proc.returncode == 0, f"{args}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return str(proc.stdout)


def _checkout(target: Path) -> Path:
    """The files a clone would have (tracked, and new ones not ignored), without build leftovers."""
    listed = _run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO)
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``make dist``'s command on a copy of the checkout."""
    tree = _checkout(tmp_path_factory.mktemp("checkout"))
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out], cwd=tree)
    return out


def _readme_wheel() -> str:
    found = re.findall(r"dist/(gpuyield-[^\s'\[]+\.whl)", (REPO / "README.md").read_text())
    assert found, "the README names no wheel"
    return str(found[0])


def test_make_dist_builds_the_wheel_the_readme_names_and_an_sdist(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    wheel = _readme_wheel()
    assert names == sorted([wheel, wheel.split("-py3")[0] + ".tar.gz"])
    with zipfile.ZipFile(dist / wheel) as archive:
        members = archive.namelist()
        meta = next(m for m in members if m.endswith(".dist-info/METADATA"))
        metadata = archive.read(meta).decode()
        entry_points = archive.read(meta.replace("METADATA", "entry_points.txt")).decode()
    # The serve extra brings what `/` renders with (the page's template needs Jinja2).
    assert re.search(r"^Requires-Dist: jinja2>=3\.1; extra == \"serve\"$", metadata, re.M)
    assert "gpuyield = gpuyield.__main__:main" in entry_points  # preflight's fast path first
    data = {m for m in members if m.startswith("gpuyield/data/")}
    assert "gpuyield/py.typed" in members and any(m.endswith(".html.j2") for m in data), data
    with tarfile.open(dist / (wheel.split("-py3")[0] + ".tar.gz")) as sdist:
        inside = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "LICENSE"} <= inside
    assert {f"src/{m}" for m in data} <= inside, "the sdist lacks package data the wheel has"


def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_readme(
    dist: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    (Path(purelib.strip()) / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"])
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index",
          "--disable-pip-version-check", f"{dist / _readme_wheel()}[serve]"])  # fmt: skip
    imported = _run([python, "-c", "import gpuyield; print(gpuyield.__file__)"])
    assert Path(imported.strip()).is_relative_to(venv), imported
    sandbox = tmp_path / "work"
    sandbox.mkdir()
    for name, as_name in SAMPLE_AS.items():
        shutil.copy(SAMPLE / name, sandbox / as_name)
    readme = next(b for b in blocks() if b.page.name == "README.md" and "\n$ gpuyield" in b.text)
    steps = session(readme)[:2]  # the quick start's own two: ingest slurm, then report
    assert [gpuyield_commands(s.command)[0][0] for s in steps] == ["ingest", "report"]
    # As docs/figures.py runs the README's commands (whose output the README shows), with the
    # fresh environment's gpuyield first on PATH.
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": "", "COLUMNS": "100", "LINES": "50", "TZ": "UTC", "NO_COLOR": "1",
           "TERM": "dumb", "LC_ALL": "C.UTF-8"}  # fmt: skip
    for step in steps:
        proc = subprocess.run(["bash", "-c", step.command], cwd=sandbox, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600,
                              check=False)  # fmt: skip
        printed = "\n".join(line.rstrip() for line in proc.stdout.splitlines())
        assert proc.returncode == 0, printed
        assert printed == step.shown.rstrip("\n"), f"{step.command}:\n{printed}"
