"""The durable state of sequences: one SlateDB key per sequence, outside the epochs.

    q/{oid:08x}    JSON {"nonce", "last", "called"}: the value nextval may have handed
                   out up to (PostgreSQL's WAL-logged last_value, SEQ_LOG_VALS ahead)

nextval is not transactional, so its state is not part of any epoch: a reservation is
written and made durable on its own before the values it covers are handed out
(docs/storage.md, ADR 002). `nonce` is the catalog object's: a key left behind by a
sequence whose CREATE rolled back (its oid reused later) is ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from headwater.storage.slate import SlateStore, storage_error

PREFIX = b"q/"


def state_key(oid: int) -> bytes:
    return b"q/%08x" % oid


@dataclass(frozen=True)
class LoggedState:
    nonce: int
    last: int  # last_value as logged: no value beyond it was handed out
    called: bool  # is_called


class SequenceLog:
    def __init__(self, store: SlateStore) -> None:
        self.store = store

    def write(self, oid: int, state: LoggedState) -> None:
        """Make `state` durable (blocking, ~ one WAL flush). Refused at once, as an
        epoch is (storage/commit.py), when the data directory cannot be written:
        SlateDB would retry the write forever."""
        _, problem = self.store.probe()
        if problem is not None:
            raise storage_error(problem, self.store.path.parent)
        value = {"nonce": state.nonce, "last": state.last, "called": state.called}
        self.store.write_durable_sync([(state_key(oid), json.dumps(value).encode())])

    def load(self) -> dict[int, LoggedState]:
        out: dict[int, LoggedState] = {}
        for key, raw in self.store.scan_prefix_sync(PREFIX):
            d = json.loads(raw)
            out[int(key[2:], 16)] = LoggedState(d["nonce"], d["last"], d["called"])
        return out
