"""Sweeps: parallel runs give the same numbers; the best interval sits near Young/Daly."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

from gpuyield.errors import MissingExtraError
from gpuyield.simulate.ettr import JobModel
from gpuyield.simulate.scenario import Policy
from gpuyield.simulate.sweep import SweepParam, SweepSpec, run_sweep
from gpuyield.simulate.sweep_files import write_sweep


def _interval_spec() -> SweepSpec:
    base = JobModel(
        num_nodes=2048,
        node_failures_per_day=3.79e-3,
        duration_s=2000 * 86400.0,
        interval_s=1800.0,
        write_s=30.0,
        restart_s=300.0,
    )
    return SweepSpec(
        param=SweepParam.INTERVAL_S,
        values=(200.0, 400.0, 800.0, 1600.0, 3200.0),
        policies=(Policy.RESTART,),
        seeds=2,
        base=base,
    )


def test_parallel_sweep_equals_serial():
    spec = SweepSpec(param=SweepParam.CLUSTER_GPUS, values=(1024.0, 65536.0), seeds=2)
    assert run_sweep(spec, jobs=1).points == run_sweep(spec, jobs=2).points


def test_best_interval_is_near_young_and_daly():
    result = run_sweep(_interval_spec(), jobs=1)
    opt = result.optimum["restart"]
    # Young: sqrt(2 * 30 s * M), M = 86400 / (2048 * 3.79e-3) s: about 817 s; grid steps are x2.
    assert opt.young_s == pytest.approx((2 * 30 * 86400 / (2048 * 3.79e-3)) ** 0.5)
    assert opt.daly_s / 2 <= opt.best_s <= opt.daly_s * 2


def test_ettr_falls_with_cluster_size_for_restart():
    spec = SweepSpec(
        param=SweepParam.CLUSTER_GPUS,
        values=(1024.0, 16384.0, 262144.0),
        seeds=1,
        policies=(Policy.RESTART,),
    )
    ettr = [p.ettr_mean for p in run_sweep(spec).points]
    assert ettr[0] > ettr[1] > ettr[2]


def test_plots_are_png_and_self_contained_html(tmp_path: Path):
    spec = SweepSpec(param=SweepParam.CLUSTER_GPUS, values=(1024.0, 8192.0), seeds=1)
    paths = write_sweep(run_sweep(spec), tmp_path)
    names = {p.name for p in paths}
    assert names == {"sweep.csv", "sweep.json", "sweep.png", "sweep.html"}
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "sweep.html").read_text()
    assert "data:image/png;base64," in page and "<link" not in page and "src='http" not in page


def test_missing_matplotlib_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    spec = SweepSpec(param=SweepParam.CLUSTER_GPUS, values=(1024.0,), seeds=1)
    with pytest.raises(MissingExtraError) as info:
        write_sweep(run_sweep(spec), tmp_path)
    assert info.value.extra == "html"
