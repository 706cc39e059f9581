"""The JVM flags of a report's Spark driver (gpuyield/lake/spark_jvm.py): ours where the user's
Spark configuration names none, theirs where it does, none when turned off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuyield.lake.spark_jvm import (
    DRIVER_OPTIONS_KEY,
    ENV_OVERRIDE,
    QUICK_DRIVER_OPTIONS,
    jvm_settings,
    user_keys,
)

OURS = {DRIVER_OPTIONS_KEY: QUICK_DRIVER_OPTIONS}


def _conf_dir(tmp_path: Path, text: str) -> dict[str, str]:
    (tmp_path / "spark-defaults.conf").write_text(text, encoding="utf-8")
    return {"SPARK_CONF_DIR": str(tmp_path)}


def test_the_driver_gets_the_quick_compiler_when_the_user_sets_no_flags(tmp_path: Path) -> None:
    env = _conf_dir(tmp_path, "spark.executor.memory 4g\nspark.executor.extraJavaOptions -Xss4m\n")
    assert jvm_settings(env) == OURS
    assert jvm_settings({"SPARK_CONF_DIR": str(tmp_path / "absent")}) == OURS


@pytest.mark.parametrize("separator", [" ", "\t", "=", ":", "  =  "])
def test_the_users_driver_flags_win_in_any_properties_syntax(
    tmp_path: Path, separator: str
) -> None:
    env = _conf_dir(tmp_path, f"# mine\n! also a comment\n{DRIVER_OPTIONS_KEY}{separator}-Xss4m\n")
    assert jvm_settings(env) == {}


def test_a_commented_key_does_not_count(tmp_path: Path) -> None:
    path = tmp_path / "spark-defaults.conf"
    path.write_text(f"# {DRIVER_OPTIONS_KEY} -Xmx1g\n  \n", encoding="utf-8")
    assert user_keys(path) == set()
    assert jvm_settings({"SPARK_CONF_DIR": str(tmp_path)}) == OURS


def test_spark_home_conf_is_read_when_no_conf_dir_is_given(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text(f"{DRIVER_OPTIONS_KEY} -Xmx1g\n")
    assert jvm_settings({"SPARK_HOME": str(tmp_path)}) == {}


def test_the_environment_replaces_or_turns_off_our_flags(tmp_path: Path) -> None:
    env = {"SPARK_CONF_DIR": str(tmp_path)}
    assert jvm_settings({**env, ENV_OVERRIDE: "-Xss8m"}) == {DRIVER_OPTIONS_KEY: "-Xss8m"}
    assert jvm_settings({**env, ENV_OVERRIDE: "  "}) == {}


_PROBE = """
import json, sys
from gpuyield.lake.spark import spark_session
with spark_session("local[1]") as session:
    bean = session.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    print(json.dumps(list(bean.getInputArguments())))
"""


def _driver_args(tmp_path: Path, defaults: str) -> list[str]:
    conf = tmp_path / "conf"
    conf.mkdir(parents=True)
    (conf / "spark-defaults.conf").write_text(
        "spark.ui.enabled false\nspark.driver.host 127.0.0.1\n"
        "spark.driver.bindAddress 127.0.0.1\n" + defaults
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_a_new_session_starts_its_driver_jvm_with_the_flag_unless_the_user_set_theirs(
    tmp_path: Path,
) -> None:
    """Real driver JVMs (``local[1]``): the one gpuyield starts runs C1 only; with the user's
    own driver flags in spark-defaults.conf, it runs those and not ours."""
    assert QUICK_DRIVER_OPTIONS in _driver_args(tmp_path / "ours", "")
    theirs = _driver_args(tmp_path / "theirs", f"{DRIVER_OPTIONS_KEY} -Dgpuyield.test=mine\n")
    assert "-Dgpuyield.test=mine" in theirs
    assert QUICK_DRIVER_OPTIONS not in theirs
