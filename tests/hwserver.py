"""Start and stop a real Headwater server process for tests and benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HeadwaterServer:
    data_dir: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    args: list[str] = field(default_factory=list)  # more `headwater start` options

    @property
    def dsn(self) -> str:
        return f"host={self.host} port={self.port} user=headwater dbname=headwater"

    def start(self, timeout: float = 60.0) -> HeadwaterServer:
        self.log_path = self.data_dir.parent / f"headwater-{self.port}.log"
        log = open(self.log_path, "ab")
        exe = [
            sys.executable,
            "-m",
            "headwater.cli",
            "start",
            "--data-dir",
            str(self.data_dir),
            "--host",
            self.host,
            "--port",
            str(self.port),
            *self.args,
        ]
        self.proc = subprocess.Popen(
            exe,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"headwater exited with {self.proc.returncode}: {self.log_tail()}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"headwater did not start in {timeout}s: {self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        if self.log_path and self.log_path.exists():
            return self.log_path.read_text(errors="replace")[-n:]
        return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def start_temp_server() -> HeadwaterServer:
    root = Path(tempfile.mkdtemp(prefix="headwater-test-"))
    return HeadwaterServer(root / "data").start()


def run_psql(
    host: str, port: int, script: str, *, quiet: bool = False, timeout: float = 120
) -> str:
    """psql 15 run on `script` (echoing it, going on after errors): stdout + stderr."""
    args = [
        "psql",
        "-X",
        "-a",
        "-h",
        host,
        "-p",
        str(port),
        "-U",
        "headwater",
        "-d",
        "headwater",
        "-v",
        "ON_ERROR_STOP=0",
    ]
    if quiet:
        args.insert(2, "-q")
    out = subprocess.run(args, input=script, capture_output=True, text=True, timeout=timeout)
    return out.stdout + out.stderr


def rss_kb(pid: int) -> int:
    """Resident memory of a process, in kB (0 if unknown)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
