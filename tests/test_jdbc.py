"""pgjdbc smoke test: tests/java/JdbcSmoke.java against the server under test.

The server address comes from the `hw_server` fixture (tests/conftest.py): an object
with `.host` and `.port`. The Java program is compiled once per session with javac
against Debian's pgjdbc (/usr/share/java/postgresql.jar, package
libpostgresql-jdbc-java, installed by scripts/setup.sh); without javac or the jar the
tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "JdbcSmoke.java"
PGJDBC_JAR = Path(os.environ.get("PGJDBC_JAR", "/usr/share/java/postgresql.jar"))
RUN_TIMEOUT = 180.0


@pytest.fixture(scope="session")
def jdbc_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    javac = shutil.which("javac")
    java = shutil.which("java")
    if javac is None or java is None:
        pytest.skip("javac/java not found: install openjdk-17-jdk-headless (scripts/setup.sh)")
    if not PGJDBC_JAR.is_file():
        pytest.skip(
            f"{PGJDBC_JAR} not found: apt-get install libpostgresql-jdbc-java (scripts/setup.sh)"
        )
    out = tmp_path_factory.mktemp("jdbc_classes")
    proc = subprocess.run(
        [
            javac,
            "--release",
            "17",
            "-Xlint:all",
            "-Werror",
            "-cp",
            str(PGJDBC_JAR),
            "-d",
            str(out),
            str(JAVA_SOURCE),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    if proc.returncode != 0:
        pytest.fail(f"javac failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return os.pathsep.join([str(out), str(PGJDBC_JAR)])


def run_smoke(classpath: str, server: Any, *extra: str) -> None:
    cmd = ["java", "-cp", classpath, "JdbcSmoke", str(server.host), str(server.port), *extra]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"JdbcSmoke did not finish in {RUN_TIMEOUT:.0f}s: {exc.stderr!r}")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"JdbcSmoke exited {proc.returncode}:\n{output}"
    assert "JDBC OK" in proc.stdout.splitlines(), output


def test_jdbc_smoke(jdbc_classpath: str, hw_server: Any) -> None:
    run_smoke(jdbc_classpath, hw_server)


def test_jdbc_metadata(jdbc_classpath: str, hw_server: Any) -> None:
    run_smoke(jdbc_classpath, hw_server, "--metadata")
