"""Slurm job accounting: ``sacct -a -P [-X] [-D] --format=...`` text into the ``jobs`` table.

What real Slurm prints and this package handles (see ``shared/data/slurm-local/README.md``):
- ``-P`` does no quoting: a multi-line ``SubmitLine`` spreads one record over several lines, and a
  pipe inside ``SubmitLine`` adds a field. Records are reassembled by counting separators.
- Times are local without a zone (``--tz``); ``Unknown``/``None`` mean "no such time".
- States carry words (``CANCELLED by 0``); the first word is the state.
- Without ``-X`` each job has step rows (``.batch``, ``.extern``, ``.0``): they are not extra
  allocations and are skipped (counted). With ``-D`` the runs of a requeued job share ``JobIDRaw``.
- GPUs come from ``AllocTRES``: ``gres/gpu=N`` when present, else the sum of ``gres/gpu:TYPE=N``
  (Slurm prints both for typed GRES; adding them would double count).

The modules, in the order a file goes through them: ``header`` (field names, delimiter, column
map), ``records`` (text to records), ``typed`` (records to typed rows and problem codes, in SQL),
``checks`` (the refusals that keep a wrong number out), ``staging`` (the temporary tables, and the
only module that names them), ``load`` (into ``jobs`` and ``job_nodes``, directly or from the stage).
"""

from gpuyield.ingest.sacct.header import SacctHeader, column_map, read_header, use_pipe_copy
from gpuyield.ingest.sacct.records import csv_source_sql, file_order_kept
from gpuyield.ingest.sacct.staging import SacctStage, stage_sacct
from gpuyield.ingest.sacct.typed import KNOWN_STATES, LATEST_TIME_SQL, typed_select

__all__ = [
    "KNOWN_STATES",
    "LATEST_TIME_SQL",
    "SOURCE",
    "SacctHeader",
    "SacctStage",
    "column_map",
    "csv_source_sql",
    "file_order_kept",
    "read_header",
    "stage_sacct",
    "typed_select",
    "use_pipe_copy",
]

SOURCE = "slurm.sacct"
