"""The JVM flags a report's Spark driver starts with, unless the user chose theirs.

The driver plans a report: a few dozen queries, each analysed, optimized and turned into
generated Java that is new to the JVM, none of it a loop that runs long. HotSpot's optimizing
compiler (C2) spends CPU compiling those paths on the cores the report runs on, and it pays back
only in hot loops, which are the executors' (they scan the rows). So the driver gets the quick
compiler only (C1, ``-XX:TieredStopAtLevel=1``) and the executors keep the JVM's default.
``python -m bench lake --jobs N --spark-conf ...`` measured both choices at 1M and 10M jobs
(docs/scale.md): C1 on the driver helps at both sizes; C1 on the executors too helps a small
report a lot and costs a large one.

A user's own ``spark.driver.extraJavaOptions`` (in ``spark-defaults.conf``, where
``spark-submit`` reads it) wins; ``GPUYIELD_SPARK_DRIVER_JVM_OPTIONS`` replaces ours (empty:
none).
"""

from __future__ import annotations

import os
from pathlib import Path

#: C1 only: no C2 compile threads competing with the report for the driver's cores.
QUICK_DRIVER_OPTIONS = "-XX:TieredStopAtLevel=1"
DRIVER_OPTIONS_KEY = "spark.driver.extraJavaOptions"
ENV_OVERRIDE = "GPUYIELD_SPARK_DRIVER_JVM_OPTIONS"


def jvm_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's ``extraJavaOptions`` to give a new session: ours, unless the user's Spark
    configuration sets that key or the environment turns ours off (then nothing)."""
    env = dict(os.environ) if environ is None else environ
    options = env.get(ENV_OVERRIDE, QUICK_DRIVER_OPTIONS).strip()
    if not options or DRIVER_OPTIONS_KEY in user_keys(_defaults_file(env)):
        return {}
    return {DRIVER_OPTIONS_KEY: options}


def _defaults_file(env: dict[str, str]) -> Path | None:
    """Where ``spark-submit`` reads ``spark-defaults.conf``: ``SPARK_CONF_DIR``, else
    ``SPARK_HOME/conf`` (pyspark's own directory when neither is set)."""
    if env.get("SPARK_CONF_DIR"):
        return Path(env["SPARK_CONF_DIR"]) / "spark-defaults.conf"
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"]) / "conf" / "spark-defaults.conf"
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).parent / "conf" / "spark-defaults.conf"


def user_keys(path: Path | None) -> set[str]:
    """The keys a ``spark-defaults.conf`` sets (Java properties syntax: ``key value``,
    ``key=value`` or ``key:value``; ``#`` and ``!`` start comments). A file that cannot be read
    sets nothing here: Spark reports it itself."""
    if path is None:
        return set()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    keys = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i, ch in enumerate(line) if ch in " \t=:"), default=len(line))
        keys.add(line[:cut])
    return keys
