"""Fault injection for tests: with HEADWATER_FAULT_INJECTION=1 in the server's
environment, a file {data_dir}/faults/{name} makes the named step fail (or wait).

The names each layer checks are listed where they are checked (server/matviews.py,
server/engine_snapshots.py, storage/commit.py). Without the variable nothing is read.
"""

from __future__ import annotations

import os
from pathlib import Path

FAULTS_ENV = "HEADWATER_FAULT_INJECTION"


def enabled() -> bool:
    return os.environ.get(FAULTS_ENV) == "1"


def injected(data_dir: Path | None, name: str, consume: bool = False) -> bool:
    """Whether fault `name` is armed; `consume` disarms it (a one-shot fault)."""
    if data_dir is None or not enabled():
        return False
    path = data_dir / "faults" / name
    if not path.exists():
        return False
    if consume:
        path.unlink(missing_ok=True)
    return True
