"""The PostgreSQL version Headwater speaks as, said once: the ParameterStatus and SHOW
values (server/settings.py) and version() (catalog/pg/internal.py, planner/pg_compat.py)."""

from __future__ import annotations

from headwater import __version__

SERVER_VERSION = "15.0"
SERVER_VERSION_NUM = "150000"
SERVER_VERSION_TEXT = (
    f"PostgreSQL {SERVER_VERSION} (Headwater {__version__}) on x86_64-pc-linux-gnu, "
    "compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit"
)
