"""The lake: the store's tables as Parquet, partitioned by cluster and day, for the ledger on
DuckDB or Spark (``gpuyield report --lake DIR --engine duckdb|spark``)."""

from gpuyield.lake.source import ENGINES, LakeSource, lake_backend
from gpuyield.lake.write import LakeSync, export_lake, sync_lake, sync_store

__all__ = [
    "ENGINES",
    "LakeSource",
    "LakeSync",
    "export_lake",
    "lake_backend",
    "sync_lake",
    "sync_store",
]
