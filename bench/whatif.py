"""What-if benchmark: the fit's recovery study, and fit + projection on a 10M-job store.

``recovery``: clusters whose parameters we set (failure rates 0.5x, 1x and 3x Llama 3's, job mixes,
checkpoint intervals, idle patterns), simulated with several seeds, ingested and fitted: how often
each fitted 95% interval holds the true value; then, per cluster, each remedy's projected yield
against simulating the true scenario with that remedy (both means over the same number of seeds).

``scale``: the 10M-job store of ``bench.gen_slurm`` (100k GPUs, 300 days; 100k jobs with
``--quick``): ``gpuyield whatif fit`` and ``gpuyield whatif`` (horizon 90 days, 3 draws), each in its
own subprocess (wall time, peak RSS), against ``gpuyield report`` on the same store (the ledger
alone: the baseline). The generated cluster is not a simulator scenario, so its check may fail;
the projection is forced to be timed all the same, and the JSON says which.

Run: ``python -m bench whatif [--quick]``, or ``python -m bench.whatif recovery|scale [--quick]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.gen_slurm import GenParams, cached
from bench.ledger import OUT, gpuyield_argv, measure

SCALE_JOBS = 10_000_000
QUICK_SCALE_JOBS = 100_000
REMEDIES = ("drop-replicas", "checkpoint=optimal", "fill-idle", "repair=6h", "spares=8")


# The cluster every variant starts from (cluster() copies it and applies the changes).
_BASE: dict[str, Any] = {
    "scenario": {
        "name": "recovery",
        "start": "2026-03-01T00:00:00",
        "days": 30.0,
        "seed": 0,
        "cluster": "rec",
    },
    "fleet": {"num_nodes": 512, "gpus_per_node": 8},
    "failures": {
        "rate_scale": 1.0,
        "repair_mean_s": 86400,
        "detection_s": 120,
        "software_detection_s": 120,
    },
    "lineage": [
        {
            "name": "pt",
            "release": "m1",
            "num_gpus": 2048,
            "start_day": 2.0,
            "checkpoint_interval_s": 1800,
            "checkpoint_write_s": 30,
            "startup_s": 300,
            "requeue_wait_s": 300,
            "spare_nodes": 8,
            "planned_stops_per_day": 0.2,
            "telemetry": False,
        }
    ],
    "research": {
        "enabled": True,
        "load": 0.8,
        "diverged_share": 0.02,
        "classes": [
            {
                "num_gpus": 1,
                "gpu_time_share": 0.1,
                "median_duration_s": 3600,
                "time_limit_s": 43200,
            },
            {
                "num_gpus": 8,
                "gpu_time_share": 0.5,
                "median_duration_s": 14400,
                "time_limit_s": 172800,
            },
            {
                "num_gpus": 64,
                "gpu_time_share": 0.4,
                "median_duration_s": 43200,
                "time_limit_s": 259200,
            },
        ],
    },
    "maintenance": [{"start_day": 10.0, "duration_h": 12.0, "first_node": 300, "num_nodes": 64}],
}


def cluster(rate_scale: float, **changes: Any) -> dict[str, Any]:
    """A 512-node cluster for 30 days: a 2,048-GPU lineage run and research in three classes."""
    data = copy.deepcopy(_BASE)
    data["failures"]["rate_scale"] = rate_scale
    for table, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(table), dict):
            data[table] = {**data[table], **value}
        else:
            data[table] = value
    return data


VARIANTS = {
    "rate-0.5x": cluster(0.5),
    "rate-1x": cluster(1.0),
    "rate-3x-telemetry-10min": cluster(
        3.0,
        lineage=[
            {
                "name": "pt",
                "release": "m1",
                "num_gpus": 2048,
                "start_day": 0.0,
                "checkpoint_interval_s": 600,
                "checkpoint_write_s": 20,
                "startup_s": 240,
                "requeue_wait_s": 600,
                "spare_nodes": 16,
                "telemetry": True,
            }
        ],
    ),
    "small-jobs-busy": cluster(
        2.0,
        research={
            "enabled": True,
            "load": 0.95,
            "diverged_share": 0.05,
            "classes": [
                {
                    "num_gpus": 2,
                    "gpu_time_share": 0.5,
                    "median_duration_s": 1800,
                    "duration_sigma": 1.5,
                    "time_limit_s": 14400,
                },
                {
                    "num_gpus": 4,
                    "gpu_time_share": 0.5,
                    "median_duration_s": 7200,
                    "duration_sigma": 0.8,
                    "time_limit_s": 86400,
                },
            ],
        },
    ),
    "idle-late-run-backfill": cluster(
        1.0,
        lineage=[
            {
                "name": "pt",
                "release": "m1",
                "num_gpus": 1024,
                "start_day": 12.0,
                "checkpoint_interval_s": 3600,
                "checkpoint_write_s": 60,
                "startup_s": 600,
                "requeue_wait_s": 120,
            }
        ],
        research={"enabled": True, "load": 0.5, "backfill_lineage_gaps": True},
    ),
}


def simulate_and_fit(data: dict[str, Any], seed: int, where: Path) -> tuple[Any, Any, Any]:
    """Simulate ``data`` with ``seed``, ingest its files, fit: (scenario, result, fit)."""
    from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
    from gpuyield.simulate import scenario_from_dict, simulate, write_outputs
    from gpuyield.whatif import fit_cluster

    data = copy.deepcopy(data)
    data["scenario"]["seed"] = seed
    scenario = scenario_from_dict(data, origin="<bench>")
    result = simulate(scenario)
    out = where / f"files-{seed}"
    write_outputs(result, out)
    (out / "truth.json").unlink()
    db = where / f"store-{seed}.duckdb"
    ingest_slurm(db, SlurmInputs.from_dir(out), since_s=scenario.start_s, until_s=scenario.end_s)
    return scenario, result, fit_cluster(db)


def recovery(seeds: int, projection_seeds: int) -> dict[str, Any]:
    """Coverage of the fitted intervals per variant and parameter family; projection errors."""
    from gpuyield.whatif.recovery import recovered, true_values

    figures: dict[str, Any] = {"seeds": seeds, "variants": {}}
    every: list[Any] = []
    for name, data in VARIANTS.items():
        began = time.perf_counter()
        found, refused = [], 0
        with tempfile.TemporaryDirectory(prefix="bench-whatif-") as tmp:
            for seed in range(seeds):
                scenario, result, fit = simulate_and_fit(data, 100 + seed, Path(tmp))
                found += recovered(fit, true_values(scenario, result))
                refused += bool(fit.refusals)
            projection = _projection_errors(data, fit, projection_seeds)
        every += found
        figures["variants"][name] = {
            "parameters": len(found),
            "coverage": sum(r.covered for r in found) / len(found),
            "by_family": _by_family(found),
            "fits_refused": refused,
            "missed": [
                f"{r.key}: true {r.true:.4g}, fitted {r.value:.4g} [{r.low:.4g}, {r.high:.4g}]"
                for r in found
                if not r.covered
            ],
            "projection": projection,
            "seconds": round(time.perf_counter() - began, 1),
        }
        OUT.mkdir(exist_ok=True)  # partial figures survive a variant that fails
        (OUT / "whatif-recovery.partial.json").write_text(json.dumps(figures, indent=2) + "\n")
        print(
            f"{name}: coverage {figures['variants'][name]['coverage']:.1%} of {len(found)}; "
            f"largest projection error {projection['largest_error_points']:.2f} points",
            flush=True,
        )
    figures["coverage"] = sum(r.covered for r in every) / len(every)
    figures["parameters"] = len(every)
    return figures


def _by_family(found: list[Any]) -> dict[str, float]:
    families: dict[str, list[bool]] = {}
    for r in found:
        family = ".".join(p for p in r.key.split(".")[:2] if not p.isdigit() and p != "pt")
        families.setdefault(family, []).append(r.covered)
    return {k: sum(v) / len(v) for k, v in sorted(families.items())}


def _projection_errors(data: dict[str, Any], fit: Any, seeds: int) -> dict[str, Any]:
    """Each remedy's projected yield (fitted scenario) against the true scenario with it."""
    from gpuyield.simulate import scenario_from_dict
    from gpuyield.whatif import ReplayCheck, parse_remedy, project, scenario_file
    from gpuyield.whatif.project import simulated_categories
    from gpuyield.whatif.remedies import apply_remedy

    base = scenario_file(fit).scenario()
    remedies = [parse_remedy(name, fit, base) for name in REMEDIES]
    none = ReplayCheck(seeds=0, tolerance=0.02, categories=(), refusals=())
    projected = project(fit, remedies, none, horizon_days=fit.days, seeds=seeds)

    def true_yield(remedy: Any) -> float:
        yields = []
        for seed in range(seeds):
            changed = copy.deepcopy(data)
            changed["scenario"]["seed"] = 1000 + seed
            scenario = scenario_from_dict(changed, origin="<true scenario>")
            if remedy is not None:
                scenario = apply_remedy(remedy, scenario, fit)
            sim = simulated_categories(scenario)
            yields.append(sim.categories["released"] / sim.installed_gpu_seconds)
        return statistics.fmean(yields)

    baseline = true_yield(None)
    rows = {"baseline": {"projected": projected.baseline.yield_.mean, "true": baseline}}
    for r in projected.remedies:
        truth = true_yield(r.remedy)
        rows[r.remedy.name] = {
            "projected": r.outcome.yield_.mean,
            "true": truth,
            "gain_projected": r.yield_gain.mean,
            "gain_true": truth - baseline,
        }
    errors = [abs(v["projected"] - v["true"]) * 100 for v in rows.values()]
    return {"seeds": seeds, "yields": rows, "largest_error_points": max(errors)}


def _timed(argv: list[str]) -> tuple[Any, dict[str, Any]]:
    """``measure`` plus the command's CPU time (user + system, from the reaped child's usage):
    on a shared machine wall time says as much about the neighbours as about the command, so the
    figures also carry the load average (1 minute) as the command started and ended, and when."""
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    measured = measure(argv)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures = {
        **measured.figures(),
        "cpu_s": round(cpu_s, 1),
        "started_utc": started,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        # The command as a reader types it: the console script by name, paths as given.
        "command": " ".join(["gpuyield", *argv[1:]]),
    }
    # Each phase as it ends: a long run cut short still says what it measured.
    shown = {k: v for k, v in figures.items() if k != "stderr_tail"}
    print(f"{' '.join(argv[-8:])}: {json.dumps(shown)}", file=sys.stderr, flush=True)
    return measured, figures


def scale(num_jobs: int, store: Path | None = None) -> dict[str, Any]:
    """Fit and projection on a generated store of ``num_jobs`` jobs, against the report;
    ``store``: that data set ingested already (by an earlier run): the ingest is not repeated."""
    params = GenParams(num_jobs=num_jobs)
    data = cached(params, OUT / "data")
    figures: dict[str, Any] = {
        "jobs": num_jobs,
        "window_days": params.window_s / 86400,
        "sacct_rows": data.num_rows,
    }

    def timed(name: str, argv: list[str]) -> Any:
        measured, figures[name] = _timed(argv)
        # Each command's figures as it ends: a run cut short (the 10M store takes hours on a
        # shared machine) keeps what it measured.
        (OUT / "whatif-scale.partial.json").write_text(json.dumps(figures, indent=2) + "\n")
        return measured

    with tempfile.TemporaryDirectory(prefix="bench-whatif-", dir=OUT) as tmp:
        db = store or Path(tmp) / "store.duckdb"
        until = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(params.window_end_s))
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(params.window_start_s))
        gy = gpuyield_argv()
        # The generated window may run past this machine's clock (the 10M store ends in 2027):
        # the capture's present is the window's end, as bench.ledger gives it.
        ingest = [*gy, "ingest", "slurm", "--dir", str(data.out_dir), "--db", str(db)]
        ingest += ["--since", since, "--until", until, "--now", until]
        if store is not None:
            figures["store"] = str(store)
        elif timed("ingest", ingest).returncode:
            return figures  # nothing to time on a store that is not there
        report = timed("report_baseline", [*gy, "report", "--db", str(db), "--json"])
        fitted = str(Path(tmp) / "fitted.toml")
        fit = timed(
            "whatif_fit", [*gy, "whatif", "fit", "--db", str(db), "--json", "--out", fitted]
        )
        projection = [*gy, "whatif", "--db", str(db), "--json", "--force", "--horizon", "90d"]
        projection += ["--seeds", "3", "--replay-seeds", "3", "--price-per-gpu-hour", "2"]
        timed("whatif_project", projection)
    figures["fit_over_report_wall"] = (
        round(fit.wall_s / report.wall_s, 2) if report.wall_s else None
    )
    cpu = figures["whatif_fit"]["cpu_s"], figures["report_baseline"]["cpu_s"]
    figures["fit_over_report_cpu"] = round(cpu[0] / cpu[1], 2) if cpu[1] else None
    if fit.returncode in (0, 3) and fit.stdout:
        fitted_json = json.loads(fit.stdout)
        figures["check_passed"] = fitted_json["check"]["passed"]
        figures["check_reasons"] = fitted_json["check"]["reasons"][:10]
    return figures


def run(*, quick: bool = False) -> dict[str, Any]:
    """Both parts (``python -m bench whatif``)."""
    return {
        "recovery": recovery(seeds=2 if quick else 8, projection_seeds=2 if quick else 4),
        "scale": scale(QUICK_SCALE_JOBS if quick else SCALE_JOBS),
    }


PARTS = ("recovery", "scale")


def _parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(
        prog="python -m bench.whatif",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="Figures go to bench/out/whatif.json (each part keeps the other's).",
    )
    out.add_argument(
        "parts",
        nargs="*",
        metavar="PART",
        help=f"which parts to run: {', '.join(PARTS)} (default: both)",
    )
    out.add_argument("--quick", action="store_true", help="the small configuration (minutes)")
    out.add_argument(
        "--store",
        type=Path,
        help="scale: the data set's store, ingested by an earlier run (its ingest is not timed)",
    )
    return out


def main(argv: list[str]) -> int:
    # A parser, so that --help describes the benchmark instead of starting it (hours).
    parser = _parser()
    args = parser.parse_args(argv)
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}; choose from {', '.join(PARTS)}")
    quick = bool(args.quick)
    parts = args.parts or list(PARTS)
    figures: dict[str, Any] = {}
    if "recovery" in parts:
        figures["recovery"] = recovery(seeds=2 if quick else 8, projection_seeds=2 if quick else 4)
    if "scale" in parts:
        figures["scale"] = scale(QUICK_SCALE_JOBS if quick else SCALE_JOBS, args.store)
    OUT.mkdir(exist_ok=True)
    path = OUT / "whatif.json"
    # One part at a time keeps the other's figures.
    kept = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**kept, **figures}, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
