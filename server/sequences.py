"""Sequence values: nextval, currval, setval, lastval with PostgreSQL 15's semantics.

The values change outside transactions (a ROLLBACK gives nothing back), so they live
here, not in the catalog. Durability follows PostgreSQL's SEQ_LOG_VALS: before a value
is handed out that the last durable record does not cover, a record 32 increments
ahead is made durable (storage/sequences.py); after a crash, a sequence continues past
that record, so no value is ever handed out twice. See docs/storage.md, ADR 002. The
record is written SEQ_RESERVE increments further ahead than PostgreSQL's, so that a
busy serial key (an ORM inserting) waits for one durable write per ~1,000 values rather
than per 32; what SELECT * FROM a sequence shows (log_cnt) stays PostgreSQL's, and a
crash skips up to that many more values (sequences are not gapless in PostgreSQL
either).

The functions run inside DuckDB as Python UDFs (`install`); the binder rewrites
`nextval(x)` to `hw_nextval(<session pid>, x)` (server/sequence_calls.py), so a call knows
its session: its catalog and search path (names), its currval and lastval.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from headwater.catalog.catalog import Catalog
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Column, Sequence
from headwater.catalog.privileges import has_priv, memberships
from headwater.planner.sequences import parse_regclass
from headwater.storage.duckdb_errors import udf_error
from headwater.storage.sequences import LoggedState, SequenceLog

from headwater.errors import InsufficientPrivilege, SQLError, UndefinedColumn, WrongObjectType

_NEXTVAL_DEFAULT = re.compile(r"nextval\('((?:[^']|'')+)'(?:::regclass)?\)")
SEQ_LOG_VALS = 32  # values logged ahead of the last one handed out (PostgreSQL's)
SEQ_RESERVE = 1024  # increments a durable record reaches beyond PostgreSQL's (not cycling)


class SessionView(Protocol):
    """What a call needs of its session (server/session.py's Session)."""

    pid: int
    role_oid: int

    @property
    def catalog(self) -> Catalog: ...

    def search_path(self) -> tuple[str, ...]: ...


@dataclass
class _State:
    """A sequence's shared state (PostgreSQL's sequence tuple)."""

    last: int
    log_cnt: int
    called: bool
    durable: int | None = None  # what the last durable record of nextval covers


@dataclass
class _Cached:
    """A session's view of a sequence (PostgreSQL's SeqTableData): currval, and the
    values it fetched ahead with CACHE > 1."""

    last: int
    cached: int
    increment: int


def serial_sequence(
    catalog: Catalog, search_path: tuple[str, ...], table_name: str, column: str
) -> str | None:
    """pg_get_serial_sequence(table, column): the owned sequence, schema-qualified."""
    schema, name = parse_regclass(table_name)
    table = catalog.get_relation(schema, name, search_path)
    col = column[1:-1] if column.startswith('"') else column.lower()
    found = table.column(col)
    if found is None:
        raise UndefinedColumn(f'column "{col}" of relation "{table.name}" does not exist')
    owned = [
        r
        for r in catalog.relations.values()
        if isinstance(r, Sequence) and r.owned_by == (table.oid, col)
    ]
    column_default = found.default or ""
    owned.sort(key=lambda r: (f"'{r.oid}'" not in column_default, r.oid))
    if owned:
        return f"{quote_ident(owned[0].schema)}.{quote_ident(owned[0].name)}"
    return None


class Sequences:
    """Every sequence's state, each session's currval/lastval, durable reservations."""

    def __init__(self, log: SequenceLog) -> None:
        self.log = log
        self._lock = threading.RLock()
        self._states: dict[tuple[int, int], _State] = {}  # (oid, nonce) -> state
        self._logged: dict[int, LoggedState] = {}  # durable records found at start
        self._sessions: dict[int, weakref.ref[Any]] = {}
        self._gone: list[int] = []  # sessions collected, not yet forgotten (_detach)
        self._cached: dict[int, dict[int, _Cached]] = {}  # session pid -> oid -> cache
        self._last_used: dict[int, int] = {}  # session pid -> oid of its last nextval

    # -- start and sessions --------------------------------------------------------------
    def recover(self) -> None:
        """Read the durable records (at start, before any call)."""
        self._logged = self.log.load()

    def attach(self, session: SessionView) -> int:
        """The key calls of `session` pass to the UDFs (its pid)."""
        key = session.pid
        ref = self._sessions.get(key)
        if ref is None or ref() is not session:
            self._sessions[key] = weakref.ref(session, lambda _r, k=key: self._detach(k))
        return key

    def _detach(self, key: int) -> None:
        """A session was collected. The weakref callback runs on whichever thread the
        collector runs, at any allocation: also on the SlateDB thread while a nextval
        holds the lock and waits there for its durable write. So it never waits for the
        lock: the key is left for whoever next takes it without waiting."""
        self._gone.append(key)
        if self._lock.acquire(blocking=False):
            try:
                while self._gone:
                    gone = self._gone.pop()
                    ref = self._sessions.get(gone)
                    if ref is not None and ref() is None:  # (not a new session's key)
                        del self._sessions[gone]
                        self._cached.pop(gone, None)
                        self._last_used.pop(gone, None)
            finally:
                self._lock.release()

    # -- state ---------------------------------------------------------------------------
    def _state(self, seq: Sequence) -> _State:
        st = self._states.get((seq.oid, seq.nonce))
        if st is None:
            rec = self._logged.get(seq.oid)
            if rec is not None and rec.nonce == seq.nonce:
                st = _State(rec.last, 0, rec.called, rec.last if rec.called else None)
            else:
                st = _State(seq.start, 0, False)
            self._states[(seq.oid, seq.nonce)] = st
        return st

    def _write(self, seq: Sequence, last: int, called: bool) -> None:
        try:
            self.log.write(seq.oid, LoggedState(seq.nonce, last, called))
        except SQLError:
            raise
        except Exception as exc:  # noqa: BLE001 - storage's own error, as an epoch's
            raise SQLError(f'could not write sequence "{seq.name}": {exc}', "58030") from None

    def peek(self, seq: Sequence) -> tuple[int, int, bool]:
        """(last_value, log_cnt, is_called): SELECT * FROM seq."""
        with self._lock:
            st = self._state(seq)
            return st.last, st.log_cnt, st.called

    def last_value(self, seq: Sequence) -> int | None:
        """pg_sequences.last_value: NULL before the first nextval."""
        with self._lock:
            st = self._state(seq)
            return st.last if st.called else None

    # -- the functions ---------------------------------------------------------------------
    def nextval(self, key: int, seq: Sequence) -> int:
        """PostgreSQL's nextval_internal."""
        with self._lock:
            elm = self._cached.setdefault(key, {}).get(seq.oid)
            if elm is not None and elm.last != elm.cached:
                elm.last += elm.increment
                self._last_used[key] = seq.oid
                return elm.last
            st = self._state(seq)
            incby, maxv, minv, cache = seq.increment, seq.max_value, seq.min_value, seq.cache
            last = nxt = result = st.last
            fetch = cache
            log = st.log_cnt
            rescnt = 0
            if not st.called:
                rescnt += 1
                fetch -= 1
            logit = False
            if log < fetch or not st.called:
                fetch = log = fetch + SEQ_LOG_VALS
                logit = True
            while fetch:
                if incby > 0:
                    if (maxv >= 0 and nxt > maxv - incby) or (maxv < 0 and nxt + incby > maxv):
                        if rescnt > 0:
                            break
                        if not seq.cycle:
                            raise SQLError(
                                f'nextval: reached maximum value of sequence "{seq.name}" ({maxv})',
                                "2200H",
                            )
                        nxt = minv
                    else:
                        nxt += incby
                else:
                    if (minv < 0 and nxt < minv - incby) or (minv >= 0 and nxt + incby < minv):
                        if rescnt > 0:
                            break
                        if not seq.cycle:
                            raise SQLError(
                                f'nextval: reached minimum value of sequence "{seq.name}" ({minv})',
                                "2200H",
                            )
                        nxt = maxv
                    else:
                        nxt += incby
                fetch -= 1
                if rescnt < cache:
                    log -= 1
                    rescnt += 1
                    last = nxt
                    if rescnt == 1:
                        result = nxt
            log -= fetch
            if logit and not _covers(st.durable, nxt, incby):
                # durable before any value it covers is handed out
                reach = _reserve(seq, nxt)
                self._write(seq, reach, True)
                st.durable = reach
            st.last, st.called, st.log_cnt = last, True, log
            self._cached[key][seq.oid] = _Cached(result, last, incby)
            self._last_used[key] = seq.oid
            return result

    def spare(self, key: int, seq: Sequence) -> int:
        """How many values nextval hands out before it writes its log ahead (durably,
        blocking): the session's cached ones, then those PostgreSQL's log_cnt or the
        durable record covers (a record is due when the value 32 + CACHE increments
        ahead is not covered). 0 while another thread holds the lock (it may be
        writing)."""
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            elm = self._cached.get(key, {}).get(seq.oid)
            ahead = (elm.cached - elm.last) // elm.increment if elm is not None else 0
            st = self._state(seq)
            if not st.called:
                return ahead
            room = st.log_cnt // seq.cache * seq.cache
            if st.durable is not None:
                covered = (st.durable - st.last) // seq.increment - SEQ_LOG_VALS - seq.cache
                room = max(room, covered)
            return ahead + room
        finally:
            self._lock.release()

    def currval(self, key: int, seq: Sequence) -> int:
        with self._lock:
            elm = self._cached.get(key, {}).get(seq.oid)
            if elm is None:
                raise SQLError(
                    f'currval of sequence "{seq.name}" is not yet defined in this session',
                    "55000",
                )
            return elm.last

    def lastval(self, key: int, catalog: Catalog) -> int:
        with self._lock:
            oid = self._last_used.get(key)
            if oid is None or not isinstance(catalog.by_oid(oid), Sequence):
                raise SQLError("lastval is not yet defined in this session", "55000")
            return self._cached[key][oid].last

    def setval(self, key: int, seq: Sequence, value: int, called: bool = True) -> int:
        with self._lock:
            if not seq.min_value <= value <= seq.max_value:
                raise SQLError(
                    f'setval: value {value} is out of bounds for sequence "{seq.name}" '
                    f"({seq.min_value}..{seq.max_value})",
                    "22003",
                )
            elm = self._cached.setdefault(key, {}).get(seq.oid)
            if elm is not None:
                elm.cached = elm.last  # values fetched ahead are discarded
            if called:
                if elm is None:
                    elm = self._cached[key][seq.oid] = _Cached(value, value, seq.increment)
                elm.last = elm.cached = value
            st = self._state(seq)
            self._write(seq, value, called)
            st.last, st.called, st.log_cnt, st.durable = value, called, 0, None
            return value

    def restart(self, seq: Sequence, value: int) -> None:
        """ALTER SEQUENCE ... RESTART: the next nextval returns `value`."""
        with self._lock:
            st = self._state(seq)
            self._write(seq, value, False)
            st.last, st.called, st.log_cnt, st.durable = value, False, 0, None

    def altered(self, seq: Sequence) -> None:
        """ALTER SEQUENCE: values sessions fetched ahead are discarded; the next nextval
        logs afresh (PostgreSQL rewrites the sequence with log_cnt 0)."""
        with self._lock:
            for caches in self._cached.values():
                elm = caches.get(seq.oid)
                if elm is not None:
                    elm.cached = elm.last
                    elm.increment = seq.increment
            st = self._state(seq)
            st.log_cnt, st.durable = 0, None

    def default_generator(self, session: SessionView, col: Column) -> NextVal | None:
        """For a default that is just `nextval('s'::regclass)` (serial, identity): a
        function taking the next value, for the fast INSERT path (server/batcher.py).
        None for any other default."""
        m = _NEXTVAL_DEFAULT.fullmatch(col.default or "")
        if m is None:
            return None
        text = m.group(1).replace("''", "'")
        if text.isdigit():
            seq = session.catalog.by_oid(int(text))
        else:
            seq = session.catalog.resolve(*parse_regclass(text), session.search_path())
        if not isinstance(seq, Sequence) or not may_use(session, seq, "Uw"):
            return None  # (not the role's: the call in DuckDB says so)
        return NextVal(self, self.attach(session), seq)

    # -- DuckDB functions ------------------------------------------------------------------
    def _session(self, key: int) -> Any:
        ref_session = self._sessions.get(key)
        session = ref_session() if ref_session is not None else None
        if session is None:
            raise SQLError("sequence function called outside a session", "XX000")
        return session

    def _sequence(self, key: int, ref: Any) -> tuple[Sequence, Any]:
        session = self._session(key)
        catalog = session.catalog
        if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
            rel = catalog.by_oid(int(ref))
            if rel is None:
                raise SQLError(f"could not open relation with OID {ref}", "XX000")
        else:
            schema, name = parse_regclass(ref)
            rel = catalog.get_relation(schema, name, session.search_path())
        if not isinstance(rel, Sequence):
            raise WrongObjectType(f'"{rel.name}" is not a sequence')
        return rel, session

    def _permitted(self, key: int, ref: Any, letters: str) -> Sequence:
        """The sequence `ref` names, if the session's role holds one of `letters` on it
        (nextval: USAGE or UPDATE; currval: SELECT or USAGE; setval: UPDATE)."""
        seq, session = self._sequence(key, ref)
        if not may_use(session, seq, letters):
            raise InsufficientPrivilege(f"permission denied for sequence {seq.name}")
        return seq

    def install(self, db: Any) -> None:
        """Register hw_nextval/hw_currval/hw_setval/hw_lastval on DuckDB connection `db`:
        with side effects (evaluated once per row, never folded)."""

        def each(fn: Any, *cols: pa.Array) -> pa.Array:
            out: list[int | None] = []
            rows = zip(*(c.to_pylist() for c in cols), strict=True)
            try:
                for args in rows:
                    if any(a is None for a in args[1:]):
                        out.append(None)  # STRICT functions
                        continue
                    out.append(fn(*args))
            except SQLError as e:
                raise ValueError(udf_error(e)) from None
            return pa.array(out, pa.int64())

        def nextval(key: int, ref: Any) -> int:
            return self.nextval(key, self._permitted(key, ref, "Uw"))

        def currval(key: int, ref: Any) -> int:
            return self.currval(key, self._permitted(key, ref, "rU"))

        def setval(key: int, ref: Any, value: int, called: bool = True) -> int:
            return self.setval(key, self._permitted(key, ref, "w"), value, called)

        def lastval(key: int) -> int:
            ref_session = self._sessions.get(key)
            session = ref_session() if ref_session is not None else None
            if session is None:
                raise SQLError("lastval is not yet defined in this session", "55000")
            return self.lastval(key, session.catalog)

        opts: dict[str, Any] = {"type": "arrow", "side_effects": True, "null_handling": "special"}
        db.create_function(
            "hw_nextval", lambda k, r: each(nextval, k, r), ["BIGINT", "VARCHAR"], "BIGINT", **opts
        )
        db.create_function(
            "hw_currval", lambda k, r: each(currval, k, r), ["BIGINT", "VARCHAR"], "BIGINT", **opts
        )
        db.create_function(
            "hw_setval",
            lambda k, r, v: each(setval, k, r, v),
            ["BIGINT", "VARCHAR", "BIGINT"],
            "BIGINT",
            **opts,
        )
        db.create_function(
            "hw_setval3",
            lambda k, r, v, c: each(setval, k, r, v, c),
            ["BIGINT", "VARCHAR", "BIGINT", "BOOLEAN"],
            "BIGINT",
            **opts,
        )

        def state(key: int, ref: Any, part: int) -> int:
            return int(self.peek(self._sequence(key, ref)[0])[part])

        db.create_function(
            "hw_sequence_state",
            lambda k, r, p: each(state, k, r, p),
            ["BIGINT", "VARCHAR", "INTEGER"],
            "BIGINT",
            **opts,
        )

        def serial(key: int, table: str, column: str) -> str | None:
            session = self._session(key)
            return serial_sequence(session.catalog, session.search_path(), table, column)

        def serial_udf(k: pa.Array, t: pa.Array, c: pa.Array) -> pa.Array:
            try:
                out = [
                    None if None in (a, b) else serial(key, a, b)
                    for key, a, b in zip(k.to_pylist(), t.to_pylist(), c.to_pylist(), strict=True)
                ]
            except SQLError as e:
                raise ValueError(udf_error(e)) from None
            return pa.array(out, pa.string())

        db.create_function(
            "hw_serial_sequence", serial_udf, ["BIGINT", "VARCHAR", "VARCHAR"], "VARCHAR", **opts
        )
        db.create_function("hw_lastval", lambda k: each(lastval, k), ["BIGINT"], "BIGINT", **opts)


def may_use(session: SessionView, seq: Sequence, letters: str) -> bool:
    """Whether the session's role holds one of `letters` on `seq`. An identity column's
    sequence needs none (PostgreSQL's NextValueExpr checks nothing); a session without a
    role (the server's own) may."""
    if seq.identity:
        return True
    cat = session.catalog
    role = cat.roles.get(session.role_oid)
    if role is None or role.superuser:
        return True
    roles = memberships(cat, role.oid)
    return any(has_priv(seq, c, roles) for c in letters)


def _covers(durable: int | None, value: int, increment: int) -> bool:
    """Does a durable record at `durable` cover `value` (no later nextval record needed)?"""
    if durable is None:
        return False
    return durable >= value if increment > 0 else durable <= value


def _reserve(seq: Sequence, value: int) -> int:
    """The record to make durable for `value`: SEQ_RESERVE increments beyond it, within
    the sequence's bounds (a cycling sequence: `value` itself, as PostgreSQL)."""
    if seq.cycle:
        return value
    ahead = value + SEQ_RESERVE * seq.increment
    return min(ahead, seq.max_value) if seq.increment > 0 else max(ahead, seq.min_value)


class NextVal:
    """A session's nextval of one sequence (a serial column's default), and how many
    values it can take without a durable write (`Sequences.spare`)."""

    __slots__ = ("key", "seq", "sequences")

    def __init__(self, sequences: Sequences, key: int, seq: Sequence) -> None:
        self.sequences, self.key, self.seq = sequences, key, seq

    def __call__(self) -> int:
        return self.sequences.nextval(self.key, self.seq)

    def spare(self) -> int:
        return self.sequences.spare(self.key, self.seq)
