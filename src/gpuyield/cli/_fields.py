"""The library's field names in the CLI's words: one table, ``field -> flag``.

Library errors name what a Python caller passed (``FieldError("simulate.days", ...)``: the
parameter ``days`` of the simulator); the CLI prints the same error with the flag its user typed
(``--duration must be > 0``). A flag whose value is in other units than the field's is a ``Flag``
with its unit, so the hint's example reads as the flag takes it (``pass e.g. --duration 7d``).
Every field a library error can name is here, and every flag here is an option of some command:
tests/test_field_errors.py checks both, so a new field or a renamed flag cannot leave a message
in the library's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class Flag:
    """A flag whose value is in other units than the library field's: ``simulate.days`` is
    ``--duration``, whose example ``7`` reads ``7d``."""

    name: str
    unit: str = ""


FLAGS: Mapping[str, str | Flag] = MappingProxyType(
    {
        # Every command with --db: the store's path.
        "store.db": "--db",
        # gpuyield ingest slurm
        "ingest.sacct": "--sacct",
        "ingest.events": "--events",
        "ingest.nodes": "--nodes",
        "ingest.manifest": "--manifest",
        "ingest.reservations": "--reservations",
        "ingest.jobs_detail": "--jobs-detail",
        "SlurmInputs.from_dir": "--dir",
        "ingest.since": "--since",
        "ingest.until": "--until",
        "ingest.now": "--now",
        "ingest.tz": "--tz",
        "ingest.lenient": "--lenient",
        "ingest.fields": "--fields",
        "ingest.cluster": "--cluster",
        # gpuyield ingest telemetry, divergence scan
        "telemetry.format": "--format",
        # gpuyield report, idle-now and every command that reads a window of the ledger
        "window.since": "--since",
        "window.until": "--until",
        "window.allow_gaps": "--allow-gaps",
        "report.by": "--by",
        "report.top": "--top",
        "report.weight": "--weight",
        "report.html_path": "--html",
        # gpuyield report --lake (the ledger of a Parquet lake, on DuckDB or Spark), lake export,
        # lake check, and ingest/collect --lake: the lake directory
        "lake.path": "--lake",
        "lake.engine": "--engine",
        "lake.spark_master": "--spark-master",
        "idle_now.window_s": "--window",
        "idle_now.top": "--top",
        # Every command that reads the store (report, ladder, idle-now): how long to wait for a writer.
        "store.wait_s": "--wait",
        # gpuyield collect (and serve --collect-every)
        "collect.since": "--since",
        "collect.until": "--until",
        "collect.overlap_s": "--overlap",
        "collect.cluster": "--cluster",
        "collect.keep_raw": "--keep-raw",
        "collect.slurm_bin": "--slurm-bin",
        "collect.max_output_bytes": "--max-output",
        # gpuyield ingest utilization
        "utilization.prom_json": "--prom-json",
        "utilization.server": "--prometheus",
        "utilization.sacct_usage": "--sacct-usage",
        "utilization.step_s": "--step",
        "utilization.cluster": "--cluster",
        "Limits.deadline_s": "--timeout",
        "PrometheusSource.url": "--prometheus",
        "PrometheusSource.since_s": "--since",
        "PrometheusSource.until_s": "--until",
        "MetricNames.node_labels": "--node-label",
        "MetricNames.gpu_labels": "--gpu-label",
        # gpuyield serve
        "serve.host": "--host",
        "serve.port": "--port",
        "serve.token_file": "--token-file",
        "serve.max_connections": "--max-connections",
        "serve.header_timeout_s": "--header-timeout",
        "serve.idle_timeout_s": "--idle-timeout",
        # gpuyield preflight
        "preflight.family": "--family",
        "preflight.run": "--run",
        # gpuyield lake size
        "lake_size.gpus": "--gpus",
        "lake_size.minutes": Flag("--within", unit="m"),
        "lake_size.sample_every_s": "--sample-every",
        "lake_size.jobs_per_gpu_year": "--jobs-per-gpu-year",
        "lake_size.machine_cores": "--machine-cores",
        # gpuyield simulate run
        "simulate.days": Flag("--duration", unit="d"),
        "simulate.seed": "--seed",
        # gpuyield simulate sweep
        "sweep.days": Flag("--duration", unit="d"),
        "sweep.jobs": "--jobs",
        "sweep.seeds": "--seeds",
        "sweep.values": "--values",
        # gpuyield simulate sweep --param ladder-skip-share
        "ladder_sweep.num_gpus": "--gpus",
        "ladder_sweep.days": Flag("--duration", unit="d"),
        "ladder_sweep.seeds": "--seeds",
        "ladder_sweep.skip_shares": "--values",
        "ladder_sweep.multiplier": "--skip-failure-multiplier",
        # gpuyield estimate train, params-from-speed, params-from-budget
        "estimate.params": "--params",
        "estimate.tokens": "--tokens",
        "estimate.gpus": "--gpus",
        "estimate.accelerator": "--accelerator",
        "estimate.precision": "--precision",
        "estimate.model": "--model",
        "estimate.mfu": "--mfu",
        "estimate.batch_tokens": "--batch-tokens",
        "estimate.price_per_gpu_hour": "--price-per-gpu-hour",
        "estimate.reported_gpu_hours": "--reported-gpu-hours",
        "estimate.peak_tflops": "--peak-tflops",
        "estimate.tokens_per_s": "--tokens-per-s",
        "estimate.num_chips": "--num-chips",
        "estimate.bytes_per_param": "--bytes-per-param",
        "estimate.efficiency": "--efficiency",
        "estimate.context_tokens": "--context-tokens",
        "estimate.kv_bytes_per_token": "--kv-bytes-per-token",
        "estimate.bandwidth_tbps": "--bandwidth-tbps",
        "estimate.dollars": "--dollars",
        "estimate.gpu_hours": "--gpu-hours",
        # gpuyield plan
        "plan.params": "--params",
        "plan.tokens": "--tokens",
        "plan.gpus": "--gpus",
        "plan.precision": "--precision",
        "plan.seeds": "--seeds",
        "plan.seed": "--seed",
        "plan.mfu": "--mfu",
        "plan.policy": "--policy",
        "plan.checkpoint_interval_s": "--checkpoint-interval",
        # gpuyield whatif, whatif fit
        "whatif.seeds": "--seeds",
        "whatif.replay_seeds": "--replay-seeds",
        "whatif.tolerance": "--tolerance",
        "whatif.horizon": "--horizon",
        "whatif.remedy": "--remedy",
        "whatif.remedy.checkpoint": "--remedy checkpoint=",
        "whatif.remedy.repair": "--remedy repair=",
        "whatif.remedy.spares": "--remedy spares=",
        "whatif.html_path": "--html",
        # gpuyield train-ft
        "train.out": "--out",
        "train.replicas": "--replicas",
        "train.steps": "--steps",
        "train.failures": "--fail-at",
        "train.checkpoint_every": "--checkpoint-every",
        "train.n_layer": "--n-layer",
        "train.n_embd": "--n-embd",
        "train.batch": "--batch",
        "train.backend": "--backend",
    }
)
