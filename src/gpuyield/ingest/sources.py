"""Every ingest source, in one list: what ``collect``, ``doctor`` and the CLI's ``ingest``
commands enumerate, and what tests/ingest/test_source_protocol.py holds them to.

Adding a source is adding it here (and its steps, as a ``gpuyield.ingest.source.Source``).
"""

from __future__ import annotations

from typing import Any

from gpuyield.ingest.gpu_models import GRES_CONF
from gpuyield.ingest.runlog import TELEMETRY
from gpuyield.ingest.slurm_sources import (
    EVENTS,
    JOBS_DETAIL,
    MANIFEST,
    NODES,
    RESERVATIONS,
    SACCT,
    SlurmSource,
)
from gpuyield.ingest.source import Source
from gpuyield.ingest.utilization import UTILIZATION

#: The files of ``gpuyield ingest slurm``, in the order they are scanned and named in errors.
SLURM_FILES: tuple[SlurmSource[Any], ...] = (
    SACCT,
    EVENTS,
    NODES,
    MANIFEST,
    RESERVATIONS,
    JOBS_DETAIL,
)

#: Every source, each with its steps (the type of what a read holds differs from one to another).
SOURCES: tuple[Source[Any, Any], ...] = (*SLURM_FILES, TELEMETRY, UTILIZATION, GRES_CONF)


def slurm_clients() -> tuple[str, ...]:
    """The Slurm clients that print the files a collection ingests, each once, in file order."""
    return tuple(dict.fromkeys(s.client for s in SLURM_FILES if s.client is not None))
