"""GPU utilization samples attributed to the jobs that held the GPUs, once, at ingest.

A sample (``gpu_samples``) covers ``[start_s, t_s)`` of one GPU. It belongs to a job run

1. by the job label the exporter put on it (``hpc_job``, jobstats' ``nvidia_gpu_jobId``), when the
   run with that JobIDRaw held GPUs on the sample's node during some of the sample's interval;
2. by its GPU index, when exactly one run held that GPU of that node at the sample's midpoint
   (``job_gpus``, from ``scontrol -d show job`` captured while the run ran);
3. by its node, when the run holding GPUs there at the midpoint held every GPU of the node.

Anything else on a node where runs held GPUs is *unattributed*, never guessed: a shared node
whose runs' GPU indices were never captured, a GPU two runs claim, a label of no run there, a
node or GPU index the inventory lacks. An unlabelled sample of a GPU no run held is
*unallocated*. Time no sample covers is unmeasured, not idle.

The result is stored grouped (``sample_groups``: per node, attribution, run and interval, with
the count of samples, of idle ones, and activity sums), so a report aggregates pre-attributed
intervals instead of joining every sample to the jobs. Every ingest calls ``sync`` inside its
transaction: it finds what the ingest changed (new samples; allocations of runs stored or
re-stored, compared with the ones the attribution last used, ``sample_jobs``; the inventory,
``sample_nodes``; captured GPU indices) as regions of (node, sample times), and attributes the
samples of those regions again. Samples that arrive before their job are attributed when it
arrives; a running job re-captured every few minutes re-attributes only the minutes it gained.

This is the ledger's rule, kept in the core because ingest runs it and the ledger reads it
(``ledger/utilization.py``; the ledger also runs it itself for an idle threshold other than the
one stored). Everything here is DuckDB SQL on the store's connection.
"""

from __future__ import annotations

from gpuyield.attribution.rules import (
    CHARGED,
    IDLE_THRESHOLD,
    MAX_GPU_INDEX,
    Shape,
    groups_sql,
    prepare,
)
from gpuyield.attribution.sync import sync

__all__ = ["CHARGED", "IDLE_THRESHOLD", "MAX_GPU_INDEX", "Shape", "groups_sql", "prepare", "sync"]
