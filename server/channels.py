"""The instance's LISTEN/NOTIFY state: who listens on which channel, what awaits
delivery, and each open transaction's LISTEN/UNLISTEN/NOTIFY (server/notify.py)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class Pending:
    """A transaction's LISTEN/UNLISTEN (in order; None is UNLISTEN *) and NOTIFYs."""

    actions: list[tuple[bool, str | None]] = field(default_factory=list)
    notifies: dict[tuple[str, str], None] = field(default_factory=dict)  # ordered set


@dataclass
class Listener:
    channels: dict[str, None] = field(default_factory=dict)  # in LISTEN order
    inbox: deque[tuple[int, str, str]] = field(default_factory=deque)


class Notifications:
    """The instance's channels: who listens, and what awaits delivery."""

    def __init__(self) -> None:
        self.listeners: dict[int, Listener] = {}
        self.pending: dict[int, Pending] = {}
