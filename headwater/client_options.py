"""Connection options of the CLI's client commands (`headwater status`, `verify`):
psql's letters (-h is the host, so such a command's parser has add_help=False)."""

from __future__ import annotations

from typing import Any


def add_connection_options(p: Any) -> None:
    p.add_argument("--help", action="help", help="show this help message and exit")
    p.add_argument("--host", "-h", default="127.0.0.1", help="server host (127.0.0.1)")
    p.add_argument("--port", "-p", type=int, default=6544, help="server port (6544)")
    p.add_argument("--user", "-U", default="headwater", help="user name (headwater)")
    p.add_argument("--dbname", "-d", help="database (default: the user name)")
