"""``gpuyield preflight``'s check: may a run launch, by the ladder of the stored manifest?

It runs at every ``sbatch``, so it answers from the cache beside the store (``ladder_cache``: no
DuckDB, no manifest model) whenever that was copied from the store as it is now, and otherwise
from the store itself, read-only with DuckDB's engine alone (``rungs``), writing the cache for the
checks after it. Both give the same verdict (tests/ladder/test_ladder_cache.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpuyield import ladder_cache
from gpuyield.errors import FieldError
from gpuyield.families import first_match
from gpuyield.ladder_verdict import LaunchCheck, PreflightResult

if TYPE_CHECKING:
    import duckdb


def check_launch(
    db: str | Path,
    *,
    gpus: int,
    family: str | None = None,
    run: str | None = None,
    at_s: int | None = None,
) -> LaunchCheck:
    """``gpuyield preflight``: may ``family`` (or the family of ``run``) launch on ``gpus`` GPUs
    at ``at_s`` (default now)? Reads the store's ladder cache, else the store (read-only)."""
    if (family is None) == (run is None):
        raise FieldError("preflight.family", "or preflight.run must be given (not both)")
    cached = ladder_cache.open_cached(db)
    if cached is None:
        return _from_store(db, gpus=gpus, family=family, run=run, at_s=at_s)
    with cached.body:
        try:
            return _from_cache(cached, gpus=gpus, family=family, run=run, at_s=at_s)
        except (ValueError, IndexError):  # a damaged line (the disk's, not ours): the store answers
            pass
    return _from_store(db, gpus=gpus, family=family, run=run, at_s=at_s)


def _from_cache(
    cached: ladder_cache.CachedLadder,
    *,
    gpus: int,
    family: str | None,
    run: str | None,
    at_s: int | None,
) -> LaunchCheck:
    started = time.perf_counter()
    named = family
    if named is None:
        index = first_match(cached.patterns, run or "")
        named = None if index is None else cached.owners[index]
    if named is None:
        return LaunchCheck(result=None, run=run)
    at = int(time.time()) if at_s is None else at_s
    evidence = cached.evidence(named, at_s=at)
    result = PreflightResult(
        family=named,
        gpus=gpus,
        at_s=at,
        policy=cached.policy,
        required_gpus=cached.policy.required_gpus(gpus),
        evidence=evidence,
        from_summary=True,  # the cache is a copy of the summary tables
        known_family=evidence is not None or cached.known(named),
        elapsed_s=time.perf_counter() - started,
    )
    return LaunchCheck(result=result, run=run)


def _from_store(
    db: str | Path, *, gpus: int, family: str | None, run: str | None, at_s: int | None
) -> LaunchCheck:
    from gpuyield import duck, rungs, store

    identity = ladder_cache.store_identity(db)
    con = store.connect(db, read_only=True, light=True)
    staged = None
    try:
        named = family if family is not None else rungs.family_of_run(con, run or "")
        answer = LaunchCheck(
            result=None
            if named is None
            else rungs.preflight(con, family=named, gpus=gpus, at_s=at_s),
            run=run,
        )
        if identity is not None:
            staged = _stage_cache(con, db, identity)
        return answer
    except duck.engine().Error as error:  # a damaged table: the light open did not read them all
        raise store.open_error(str(db), error) from None
    finally:
        con.close()
        if staged is not None:
            ladder_cache.publish(staged, db)


def _stage_cache(
    con: duckdb.DuckDBPyConnection, db: str | Path, identity: tuple[int, ...]
) -> ladder_cache.Staged | None:
    """The cache of the store as ``con`` reads it, when its summary is current (a store ingested
    by an older gpuyield is answered from the jobs until its next ingest: nothing to copy)."""
    from gpuyield import rungs
    from gpuyield.manifest import stored_manifest

    manifest = stored_manifest(con)
    if manifest.ladder is None or not rungs.summary_is_current(con):
        return None
    return ladder_cache.stage(
        con,
        db,
        identity=identity,
        policy=manifest.ladder,
        families=[(f.name, f.patterns) for f in manifest.families],
        summary_table=rungs.SUMMARY_TABLE,
        families_table=rungs.FAMILIES_TABLE,
    )
