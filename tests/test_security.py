"""TLS, authentication (SCRAM-SHA-256, md5, hba rules) and authorization (GRANT/REVOKE,
ownership), against real servers with real clients (psql 15 and psycopg).

Every connection stays on loopback. A "remote" client is simulated two ways: a rule
file that requires passwords from 127.0.0.1, and a relay that connects to the
server from 127.0.0.5 (not in the default trust rule 127.0.0.1/32).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from headwater.server.auth.scram import parse_scram, scram_verifier
from headwater.server.tls import generate_self_signed
from psycopg import sql

from tests.hwserver import HeadwaterServer

PASSWORDS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2", "md5user": "md5-Secret-3"}

HBA = """\
# superuser on loopback without a password; everyone else as if remote
host      all headwater 127.0.0.1/32 trust
hostnossl all plainonly 127.0.0.1/32 scram-sha-256
hostnossl all all       127.0.0.1/32 reject
host      all md5user   127.0.0.1/32 md5
host      all all       127.0.0.1/32 scram-sha-256
"""


def _server(root: Path, *args: str, host: str = "127.0.0.1") -> HeadwaterServer:
    root.mkdir(parents=True, exist_ok=True)
    return HeadwaterServer(root / "data", host=host, args=list(args)).start()


def create_role(name: str, password: str, login: bool = True) -> sql.Composed:
    """CREATE ROLE with the password as a literal (utility statements take no parameters)."""
    return sql.SQL("CREATE ROLE {} {} PASSWORD {}").format(
        sql.Identifier(name), sql.SQL("LOGIN" if login else "NOLOGIN"), sql.Literal(password)
    )


def psql(conninfo: str, sql: str, password: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(PGPASSFILE="/dev/null", PGCONNECT_TIMEOUT="20")
    if password is not None:
        env["PGPASSWORD"] = password
    return subprocess.run(
        ["psql", conninfo, "-X", "-w", "-tA", "-v", "ON_ERROR_STOP=1", "-c", sql],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def dsn(server: HeadwaterServer, user: str = "headwater", **kw: str) -> str:
    parts = {
        "host": server.host,
        "port": str(server.port),
        "user": user,
        "dbname": "headwater",
        "sslmode": "disable",
        **kw,
    }
    return " ".join(f"{k}={v}" for k, v in parts.items())


# -- fixtures -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def sec() -> Iterator[HeadwaterServer]:
    root = Path(tempfile.mkdtemp(prefix="headwater-sec-"))
    (root / "hba.conf").write_text(HBA)
    server = _server(root, "--hba", str(root / "hba.conf"))
    with psycopg.connect(dsn(server), autocommit=True) as c:
        for user, pw in PASSWORDS.items():
            if user == "md5user":
                continue
            c.execute(create_role(user, pw))
        # md5: given pre-hashed, as pg_dump and old clients do
        import hashlib

        md5 = "md5" + hashlib.md5((PASSWORDS["md5user"] + "md5user").encode()).hexdigest()
        c.execute(create_role("md5user", md5))
        c.execute(create_role("plainonly", "plain-Secret-4"))
        c.execute(create_role("cannot", "cannot-Secret-5", login=False))
        c.execute("CREATE USER expired PASSWORD 'expired-Secret-6' VALID UNTIL '2001-01-01'")
    yield server
    server.stop()


@pytest.fixture
def su(sec: HeadwaterServer) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn(sec), autocommit=True) as c:
        yield c


def connect(server: HeadwaterServer, user: str, **kw: Any) -> psycopg.Connection[Any]:
    kw.setdefault("sslmode", "require")
    kw.setdefault("password", PASSWORDS.get(user))
    kw.setdefault("autocommit", True)
    return psycopg.connect(host=server.host, port=server.port, user=user, dbname="headwater", **kw)


_n = iter(range(10**6))


@pytest.fixture
def tname() -> str:
    return f"sec_t{next(_n)}"


# -- TLS ------------------------------------------------------------------------------
def test_tls_require_and_verify_full(sec: HeadwaterServer) -> None:
    crt = sec.data_dir / "server.crt"
    key = sec.data_dir / "server.key"
    assert crt.exists() and key.exists()
    assert key.stat().st_mode & 0o777 == 0o600
    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    assert cert.subject.rfc4514_string() == "CN=localhost"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)

    for host in ("localhost", "127.0.0.1"):
        out = psql(
            f"host={host} port={sec.port} user=headwater dbname=headwater "
            f"sslmode=verify-full sslrootcert={crt}",
            "SELECT 'tls ok'",
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "tls ok"
    out = psql(dsn(sec, sslmode="require"), "SELECT 1")
    assert out.returncode == 0, out.stderr

    with psycopg.connect(dsn(sec, sslmode="verify-full", sslrootcert=str(crt))) as c:
        assert c.pgconn.ssl_in_use
        assert c.execute("SELECT 1").fetchone() == (1,)
    with psycopg.connect(dsn(sec, sslmode="disable")) as c:
        assert not c.pgconn.ssl_in_use


def test_wrong_certificate_refused(sec: HeadwaterServer, tmp_path: Path) -> None:
    other_crt, other_key = tmp_path / "other.crt", tmp_path / "other.key"
    generate_self_signed(other_crt, other_key)  # another CA, same names
    conninfo = dsn(sec, host="localhost", sslmode="verify-full", sslrootcert=str(other_crt))
    out = psql(conninfo, "SELECT 1")
    assert out.returncode != 0
    assert "certificate verify failed" in out.stderr
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        psycopg.connect(conninfo)
    # verify-full checks the name as well: the certificate does not cover 127.0.0.2
    crt = sec.data_dir / "server.crt"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn(sec, sslmode="verify-full", sslrootcert=str(crt), host="127.0.0.2"))


def _ca_and_leaf(tmp: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate it signs (for --tls-cert/--tls-key)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Headwater Test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA384())
    )
    ca_path, crt_path, key_path = tmp / "ca.crt", tmp / "leaf.crt", tmp / "leaf.key"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    crt_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return ca_path, crt_path, key_path


def test_given_certificate_and_no_tls(tmp_path: Path) -> None:
    ca, crt, key = _ca_and_leaf(tmp_path)
    root = tmp_path / "given"
    (tmp_path / "hba.conf").write_text(HBA)
    server = _server(
        root, "--tls-cert", str(crt), "--tls-key", str(key), "--hba", str(tmp_path / "hba.conf")
    )
    try:
        assert not (root / "data" / "server.crt").exists()
        conninfo = dsn(server, host="localhost", sslmode="verify-full", sslrootcert=str(ca))
        out = psql(conninfo, "SELECT 'given ok'")
        assert out.returncode == 0, out.stderr
        # SCRAM-SHA-256-PLUS binds to this certificate (signed with SHA-384)
        with psycopg.connect(conninfo, autocommit=True) as c:
            c.execute("CREATE ROLE cb LOGIN PASSWORD 'cb-Secret'")
        with psycopg.connect(
            dsn(server, user="cb", sslmode="require", channel_binding="require"),
            password="cb-Secret",
        ) as c:
            assert c.execute("SELECT 2").fetchone() == (2,)
    finally:
        server.stop()

    server = _server(tmp_path / "notls", "--no-tls")
    try:
        out = psql(dsn(server, sslmode="require"), "SELECT 1")
        assert out.returncode != 0
        assert "server does not support SSL" in out.stderr
        out = psql(dsn(server, sslmode="prefer"), "SELECT 'plain ok'")
        assert out.returncode == 0 and out.stdout.strip() == "plain ok", out.stderr
        assert not (tmp_path / "notls" / "data" / "server.key").exists()
    finally:
        server.stop()


# -- authentication -------------------------------------------------------------------
def test_password_right_and_wrong_psql(sec: HeadwaterServer) -> None:
    ok = psql(dsn(sec, "alice", sslmode="require"), "SELECT current_user", PASSWORDS["alice"])
    assert ok.returncode == 0, ok.stderr
    bad = psql(dsn(sec, "alice", sslmode="require"), "SELECT 1", "not-her-password")
    assert bad.returncode != 0
    assert 'password authentication failed for user "alice"' in bad.stderr
    none = psql(dsn(sec, "alice", sslmode="require"), "SELECT 1")
    assert none.returncode != 0 and "no password supplied" in none.stderr
    # an unknown role gets exactly the same answer: existence is not leaked
    ghost = psql(dsn(sec, "ghost", sslmode="require"), "SELECT 1", "whatever")
    assert 'password authentication failed for user "ghost"' in ghost.stderr
    md5 = psql(dsn(sec, "md5user", sslmode="require"), "SELECT 'md5 ok'", PASSWORDS["md5user"])
    assert md5.returncode == 0 and md5.stdout.strip() == "md5 ok", md5.stderr
    md5bad = psql(dsn(sec, "md5user", sslmode="require"), "SELECT 1", "nope")
    assert 'password authentication failed for user "md5user"' in md5bad.stderr


def test_password_psycopg_and_channel_binding(sec: HeadwaterServer) -> None:
    with connect(sec, "alice") as c:
        assert c.pgconn.ssl_in_use
        assert c.info.parameter_status("is_superuser") == "off"
        assert c.info.parameter_status("session_authorization") == "alice"
    with connect(sec, "alice", channel_binding="require") as c:  # SCRAM-SHA-256-PLUS
        assert c.execute("SELECT 1").fetchone() == (1,)
    with connect(sec, "alice", channel_binding="disable") as c:  # plain SCRAM-SHA-256
        assert c.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError) as e:
        connect(sec, "alice", password="wrong")
    assert 'password authentication failed for user "alice"' in str(e.value)
    with pytest.raises(psycopg.OperationalError) as e:
        connect(sec, "cannot", password="cannot-Secret-5")
    assert 'role "cannot" is not permitted to log in' in str(e.value)
    with pytest.raises(psycopg.OperationalError) as e:
        connect(sec, "expired", password="expired-Secret-6")
    assert 'password authentication failed for user "expired"' in str(e.value)


def test_hba_rules(sec: HeadwaterServer, su: psycopg.Connection[Any]) -> None:
    # hostnossl ... reject: a plain connection is refused before any password
    with pytest.raises(psycopg.OperationalError) as e:
        connect(sec, "alice", sslmode="disable")
    assert "pg_hba.conf rejects connection" in str(e.value)
    assert 'user "alice"' in str(e.value) and "no encryption" in str(e.value)
    # a hostnossl rule that asks for a password matches plain connections only
    with psycopg.connect(dsn(sec, "plainonly", sslmode="disable"), password="plain-Secret-4") as c:
        assert not c.pgconn.ssl_in_use
    # ALTER ROLE ... PASSWORD and NOLOGIN take effect for the next connection
    su.execute("CREATE ROLE carol LOGIN PASSWORD 'first-Pw'")
    with connect(sec, "carol", password="first-Pw"):
        pass
    su.execute("ALTER ROLE carol PASSWORD 'second-Pw'")
    with pytest.raises(psycopg.OperationalError):
        connect(sec, "carol", password="first-Pw")
    with connect(sec, "carol", password="second-Pw") as c:
        c.execute("ALTER ROLE CURRENT_USER PASSWORD 'third-Pw'")  # one's own password
    with connect(sec, "carol", password="third-Pw"):
        pass
    su.execute("ALTER ROLE carol NOLOGIN")
    with pytest.raises(psycopg.OperationalError, match="not permitted to log in"):
        connect(sec, "carol", password="third-Pw")
    su.execute("ALTER ROLE carol PASSWORD NULL LOGIN")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        connect(sec, "carol", password="third-Pw")
    su.execute("DROP ROLE carol")


class Relay:
    """Forwards a local port to the server, connecting from `source` (a loopback
    address outside 127.0.0.1/32): the server sees a non-loopback-style peer."""

    def __init__(self, target: tuple[str, int], source: str = "127.0.0.5") -> None:
        self.target, self.source = target, source
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            up = socket.socket()
            up.bind((self.source, 0))
            up.connect(self.target)
            for a, b in ((client, up), (up, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


def test_non_loopback_needs_password_with_default_rules(tmp_path: Path) -> None:
    server = _server(tmp_path, host="127.0.0.2")  # no --hba: the default rules
    relay = Relay((server.host, server.port))
    try:
        # from 127.0.0.1 (the source address the kernel picks): trust
        with psycopg.connect(dsn(server), autocommit=True) as c:
            c.execute("CREATE ROLE remote LOGIN PASSWORD 'remote-Secret'")
        far = {"host": "127.0.0.1", "port": relay.port, "dbname": "headwater"}
        with pytest.raises(psycopg.OperationalError) as e:  # the server asks for a password
            psycopg.connect(**far, user="headwater", sslmode="require")
        assert "no password supplied" in str(e.value)
        with pytest.raises(psycopg.OperationalError) as e:  # headwater has none: refused
            psycopg.connect(**far, user="headwater", password="guess", sslmode="require")
        assert 'password authentication failed for user "headwater"' in str(e.value)
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(**far, user="remote", password="wrong", sslmode="require")
        with psycopg.connect(
            **far, user="remote", password="remote-Secret", sslmode="require"
        ) as c:
            assert c.execute("SELECT 'remote ok'").fetchone() == ("remote ok",)
        out = psql(
            f"host=127.0.0.1 port={relay.port} user=remote dbname=headwater sslmode=require",
            "SELECT 'psql remote ok'",
            "remote-Secret",
        )
        assert out.returncode == 0 and out.stdout.strip() == "psql remote ok", out.stderr
    finally:
        relay.close()
        server.stop()
    assert "remote-Secret" not in (server.log_tail(10**7))


@pytest.mark.oracle
def test_scram_verifier_as_postgresql_stores_it(
    pg_oracle: Any, sec: HeadwaterServer, su: psycopg.Connection[Any]
) -> None:
    """The same password and salt give PostgreSQL 15's verifier byte for byte, and a
    verifier taken from PostgreSQL logs in to Headwater (incl. SASLprep)."""
    for i, pw in enumerate(["secret", "pässwörd", "I\u00adX", "Ⅸ-ﬁ"]):
        with psycopg.connect(pg_oracle.dsn, autocommit=True) as pg:
            pg.execute(f"DROP ROLE IF EXISTS scram_{i}")
            pg.execute(create_role(f"scram_{i}", pw))
            row = pg.execute(
                "SELECT rolpassword FROM pg_authid WHERE rolname = %s", [f"scram_{i}"]
            ).fetchone()
        assert row is not None
        theirs = row[0]
        sec_ = parse_scram(theirs)
        assert sec_ is not None
        assert scram_verifier(pw, sec_.salt, sec_.iterations) == theirs
        su.execute(create_role(f"scram_{i}", theirs))
        with connect(sec, f"scram_{i}", password=pw) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)


# -- authorization --------------------------------------------------------------------
def _denied(c: psycopg.Connection[Any], sql: str, message: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
        c.execute(sql)
    assert e.value.diag.message_primary == message
    assert e.value.diag.message_detail is None  # nothing about rows


@pytest.fixture
def alice(sec: HeadwaterServer) -> Iterator[psycopg.Connection[Any]]:
    with connect(sec, "alice") as c:
        yield c


@pytest.fixture
def bob(sec: HeadwaterServer) -> Iterator[psycopg.Connection[Any]]:
    with connect(sec, "bob") as c:
        yield c


def test_select_insert_update_delete(
    su: psycopg.Connection[Any], alice: psycopg.Connection[Any], tname: str
) -> None:
    t = tname
    su.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
    su.execute(f"INSERT INTO {t} VALUES (1, 'one'), (2, 'two')")
    msg = f"permission denied for table {t}"

    _denied(alice, f"SELECT * FROM {t}", msg)
    _denied(alice, f"SELECT count(*) FROM (SELECT 1 FROM {t} WHERE id = 1) s", msg)
    _denied(alice, f"INSERT INTO {t} VALUES (3, 'three')", msg)
    _denied(alice, f"UPDATE {t} SET v = 'x' WHERE id = 1", msg)
    _denied(alice, f"DELETE FROM {t} WHERE id = 1", msg)
    _denied(alice, f"TRUNCATE {t}", msg)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        with alice.cursor().copy(f"COPY {t} FROM STDIN") as cp:
            cp.write_row((9, "nine"))
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        with alice.cursor().copy(f"COPY {t} TO STDOUT") as cp:
            list(cp.rows())

    su.execute(f"GRANT SELECT ON TABLE {t} TO alice")
    assert alice.execute(f"SELECT v FROM {t} ORDER BY id").fetchall() == [("one",), ("two",)]
    _denied(alice, f"INSERT INTO {t} VALUES (3, 'three')", msg)

    su.execute(f"GRANT INSERT ON {t} TO alice")
    alice.execute(f"INSERT INTO {t} VALUES (3, 'three')")
    with alice.cursor().copy(f"COPY {t} (id, v) FROM STDIN") as cp:
        cp.write_row((4, "four"))
    _denied(alice, f"UPDATE {t} SET v = 'x' WHERE id = 1", msg)
    _denied(alice, f"DELETE FROM {t} WHERE id = 1", msg)

    su.execute(f"GRANT UPDATE, DELETE ON {t} TO alice")
    assert alice.execute(f"UPDATE {t} SET v = 'uno' WHERE id = 1").rowcount == 1
    assert alice.execute(f"DELETE FROM {t} WHERE id = 2").rowcount == 1
    rows = su.execute(f"SELECT id, v FROM {t} ORDER BY id").fetchall()
    assert rows == [(1, "uno"), (3, "three"), (4, "four")]

    # REVOKE takes each privilege back; UPDATE ... WHERE needs SELECT too (PostgreSQL)
    su.execute(f"REVOKE SELECT ON {t} FROM alice")
    _denied(alice, f"SELECT * FROM {t}", msg)
    _denied(alice, f"UPDATE {t} SET v = 'x' WHERE id = 1", msg)
    _denied(alice, f"INSERT INTO {t} VALUES (5, 'five') RETURNING id", msg)
    alice.execute(f"UPDATE {t} SET v = 'all'")  # no WHERE: UPDATE privilege alone
    alice.execute(f"INSERT INTO {t} VALUES (5, 'five')")
    su.execute(f"REVOKE ALL ON {t} FROM alice")
    _denied(alice, f"INSERT INTO {t} VALUES (6, 'six')", msg)
    _denied(alice, f"DELETE FROM {t}", msg)
    assert su.execute(f"SELECT count(*) FROM {t}").fetchone() == (4,)


def test_denied_statement_aborts_the_transaction(
    su: psycopg.Connection[Any], sec: HeadwaterServer, tname: str
) -> None:
    su.execute(f"CREATE TABLE {tname} (id int)")
    with connect(sec, "alice", autocommit=False) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(f"INSERT INTO {tname} VALUES (1)")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            c.execute("SELECT 1")
        c.rollback()
    assert su.execute(f"SELECT count(*) FROM {tname}").fetchone() == (0,)


def test_views_read_with_their_owners_privileges(
    su: psycopg.Connection[Any], alice: psycopg.Connection[Any], tname: str
) -> None:
    t, v = tname, f"{tname}_v"
    su.execute(f"CREATE TABLE {t} (id int, secret text)")
    su.execute(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    su.execute(f"CREATE VIEW {v} AS SELECT id FROM {t} WHERE id > 1")
    _denied(alice, f"SELECT * FROM {v}", f"permission denied for view {v}")
    su.execute(f"GRANT SELECT ON {v} TO alice")
    assert alice.execute(f"SELECT * FROM {v}").fetchall() == [(2,)]
    _denied(alice, f"SELECT * FROM {t}", f"permission denied for table {t}")
    _denied(alice, f"SELECT * FROM {v} JOIN {t} USING (id)", f"permission denied for table {t}")
    # a CTE named like the table is not the table
    assert alice.execute(f"WITH {t} AS (SELECT 7 AS id) SELECT id FROM {t}").fetchall() == [(7,)]


def test_schema_usage_and_create(
    su: psycopg.Connection[Any],
    alice: psycopg.Connection[Any],
    bob: psycopg.Connection[Any],
    tname: str,
) -> None:
    s = f"{tname}_s"
    su.execute(f"CREATE SCHEMA {s}")
    su.execute(f"CREATE TABLE {s}.data (x int)")
    su.execute(f"INSERT INTO {s}.data VALUES (42)")
    su.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO alice")
    # USAGE
    _denied(alice, f"SELECT * FROM {s}.data", f"permission denied for schema {s}")
    su.execute(f"GRANT USAGE ON SCHEMA {s} TO alice")
    assert alice.execute(f"SELECT x FROM {s}.data").fetchall() == [(42,)]
    su.execute(f"REVOKE USAGE ON SCHEMA {s} FROM alice")
    _denied(alice, f"SELECT * FROM {s}.data", f"permission denied for schema {s}")
    # CREATE (PostgreSQL 15: not even on public by default)
    _denied(alice, f"CREATE TABLE {s}.mine (x int)", f"permission denied for schema {s}")
    _denied(alice, f"CREATE TABLE {tname}_pub (x int)", "permission denied for schema public")
    su.execute(f"GRANT USAGE, CREATE ON SCHEMA {s} TO alice, bob")
    alice.execute(f"CREATE TABLE {s}.mine (x int)")
    alice.execute(f"INSERT INTO {s}.mine VALUES (1)")  # the owner may do anything
    alice.execute(f"CREATE VIEW {s}.mine_v AS SELECT x FROM {s}.mine")
    assert alice.execute(f"SELECT * FROM {s}.mine_v").fetchall() == [(1,)]
    _denied(bob, f"SELECT * FROM {s}.mine", "permission denied for table mine")
    # ownership: DROP by anyone else is refused; the owner's grant works
    _denied(bob, f"DROP TABLE {s}.mine CASCADE", "must be owner of table mine")
    _denied(bob, f"DROP VIEW {s}.mine_v", "must be owner of view mine_v")
    _denied(alice, f"DROP TABLE {s}.data", "must be owner of table data")
    _denied(alice, f"DROP SCHEMA {s} CASCADE", f"must be owner of schema {s}")
    _denied(bob, f"GRANT SELECT ON {s}.mine TO bob", "permission denied for table mine")
    alice.execute(f"GRANT SELECT ON {s}.mine TO bob")
    assert bob.execute(f"SELECT x FROM {s}.mine").fetchall() == [(1,)]
    alice.execute(f"DROP VIEW {s}.mine_v")
    alice.execute(f"DROP TABLE {s}.mine")
    _denied(alice, "CREATE SCHEMA alices", "permission denied for database headwater")
    su.execute(f"DROP SCHEMA {s} CASCADE")


def test_role_membership_and_public(
    su: psycopg.Connection[Any],
    alice: psycopg.Connection[Any],
    bob: psycopg.Connection[Any],
    tname: str,
) -> None:
    t = tname
    su.execute(f"CREATE TABLE {t} (x int)")
    su.execute(f"CREATE ROLE {t}_readers")
    su.execute(f"GRANT SELECT ON {t} TO {t}_readers")
    _denied(alice, f"SELECT * FROM {t}", f"permission denied for table {t}")
    su.execute(f"GRANT {t}_readers TO alice")
    assert alice.execute(f"SELECT count(*) FROM {t}").fetchone() == (0,)
    _denied(bob, f"SELECT * FROM {t}", f"permission denied for table {t}")
    su.execute(f"GRANT SELECT ON {t} TO PUBLIC")
    assert bob.execute(f"SELECT count(*) FROM {t}").fetchone() == (0,)
    su.execute(f"REVOKE SELECT ON {t} FROM PUBLIC")
    su.execute(f"REVOKE {t}_readers FROM alice")
    _denied(alice, f"SELECT * FROM {t}", f"permission denied for table {t}")
    # a role with grants cannot be dropped until they are revoked
    with pytest.raises(psycopg.errors.DependentObjectsStillExist):
        su.execute(f"DROP ROLE {t}_readers")
    su.execute(f"REVOKE ALL ON {t} FROM {t}_readers")
    su.execute(f"DROP ROLE {t}_readers")


def test_role_statements_need_privileges(
    su: psycopg.Connection[Any], alice: psycopg.Connection[Any]
) -> None:
    _denied(alice, "CREATE ROLE sneaky", "permission denied to create role")
    _denied(alice, "ALTER ROLE bob PASSWORD 'x'", "permission denied")
    _denied(
        alice,
        "ALTER ROLE alice SUPERUSER",
        "must be superuser to alter superuser roles or change superuser attribute",
    )
    _denied(alice, "DROP ROLE bob", "permission denied to drop role")
    _denied(alice, "GRANT headwater TO alice", 'must have admin option on role "headwater"')
    with pytest.raises(psycopg.errors.DuplicateObject):
        su.execute("CREATE ROLE alice")
    with pytest.raises(psycopg.errors.UndefinedObject):
        su.execute("DROP ROLE nobody_here")
    su.execute("DROP ROLE IF EXISTS nobody_here")
    with pytest.raises(psycopg.errors.ReservedName):
        su.execute("CREATE ROLE pg_mine")


def test_statement_timeout(su: psycopg.Connection[Any]) -> None:
    su.execute("SET statement_timeout = '200ms'")
    with pytest.raises(psycopg.errors.QueryCanceled) as e:  # 4e10 rows: hours if not stopped
        su.execute(
            "SELECT count(*) FROM generate_series(1, 200000) a, generate_series(1, 200000) b"
        )
    assert e.value.diag.message_primary == "canceling statement due to statement timeout"
    assert su.execute("SELECT 1").fetchone() == (1,)
    su.execute("RESET statement_timeout")


def test_idle_in_transaction_timeout(sec: HeadwaterServer) -> None:
    with psycopg.connect(dsn(sec)) as c:
        c.execute("SET idle_in_transaction_session_timeout = 300")
        c.commit()
        c.execute("SELECT 1")  # opens a transaction block
        time.sleep(1.0)
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout) as e:  # 25P03
            c.execute("SELECT 2")
        assert "idle-in-transaction timeout" in str(e.value)
        assert c.closed or c.broken


def test_cancel_and_terminate_backend(sec: HeadwaterServer, su: psycopg.Connection[Any]) -> None:
    long_query = "SELECT count(*) FROM generate_series(1, 300000) a, generate_series(1, 300000) b"

    def run_in_thread(conn: psycopg.Connection[Any]) -> dict[str, BaseException]:
        box: dict[str, BaseException] = {}

        def go() -> None:
            try:
                conn.execute(long_query)
            except BaseException as e:  # noqa: BLE001
                box["error"] = e

        th = threading.Thread(target=go)
        th.start()
        box_thread[id(box)] = th
        return box

    box_thread: dict[int, threading.Thread] = {}
    victim = psycopg.connect(dsn(sec), autocommit=True)
    pid = victim.info.backend_pid
    box = run_in_thread(victim)
    time.sleep(0.5)
    assert su.execute("SELECT pg_cancel_backend(%s)", [pid]).fetchone() == (True,)
    box_thread[id(box)].join(20)
    assert isinstance(box.get("error"), psycopg.errors.QueryCanceled)
    assert victim.execute("SELECT 'still here'").fetchone() == ("still here",)

    # alice may not signal a superuser's backend
    with connect(sec, "alice") as a:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            a.execute("SELECT pg_terminate_backend(%s)", [pid])
    box = run_in_thread(victim)
    time.sleep(0.5)
    assert su.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)
    box_thread[id(box)].join(20)
    assert isinstance(box.get("error"), psycopg.OperationalError)
    assert victim.closed or victim.broken
    assert su.execute("SELECT pg_cancel_backend(1)").fetchone() == (False,)


def test_passwords_never_logged(sec: HeadwaterServer) -> None:
    log = sec.log_tail(10**7)
    for pw in [*PASSWORDS.values(), "plain-Secret-4", "cannot-Secret-5", "first-Pw"]:
        assert pw not in log


# -- persistence ------------------------------------------------------------------------
def test_roles_and_grants_survive_restart(tmp_path: Path) -> None:
    (tmp_path / "hba.conf").write_text(HBA)
    server = _server(tmp_path, "--hba", str(tmp_path / "hba.conf"))
    try:
        with psycopg.connect(dsn(server), autocommit=True) as c:
            c.execute(create_role("alice", PASSWORDS["alice"]))
            c.execute(create_role("bob", PASSWORDS["bob"]))
            c.execute("CREATE ROLE team")
            c.execute("GRANT team TO bob")
            c.execute("CREATE TABLE kept (x int)")
            c.execute("INSERT INTO kept VALUES (1)")
            c.execute("GRANT SELECT, INSERT ON kept TO alice")
            c.execute("GRANT SELECT ON kept TO team")
            c.execute("CREATE SCHEMA work")
            c.execute("GRANT USAGE, CREATE ON SCHEMA work TO alice")
            c.execute("CREATE ROLE gone LOGIN")
            c.execute("DROP ROLE gone")
            c.execute("ALTER DEFAULT PRIVILEGES IN SCHEMA work GRANT SELECT ON TABLES TO bob")
            c.execute("CREATE SEQUENCE work.counter")
            c.execute("GRANT USAGE ON SEQUENCE work.counter TO alice")
        with connect(server, "alice") as a:
            a.execute("CREATE TABLE work.hers (y int)")
        server.stop()
        server.start()
        with psycopg.connect(dsn(server), autocommit=True) as c:
            # ALTER DEFAULT PRIVILEGES and sequence grants are kept; a table the
            # superuser creates in `work` gets bob's SELECT, alice's does not (its owner)
            c.execute("CREATE TABLE work.his (z int)")
            assert c.execute(
                "SELECT relname, relacl::text[] FROM pg_class WHERE relnamespace ="
                " 'work'::regnamespace AND relkind IN ('r', 'S') ORDER BY 1"
            ).fetchall() == [
                ("counter", ["headwater=rwU/headwater", "alice=U/headwater"]),
                ("hers", None),
                ("his", ["headwater=arwdDxt/headwater", "bob=r/headwater"]),
            ]
        with connect(server, "alice") as a:
            assert a.execute("SELECT nextval('work.counter')").fetchone() == (1,)
            _denied(a, "SELECT setval('work.counter', 5)", "permission denied for sequence counter")
        with connect(server, "alice") as a:
            a.execute("INSERT INTO kept VALUES (2)")
            assert a.execute("SELECT count(*) FROM kept").fetchone() == (2,)
            _denied(a, "DELETE FROM kept", "permission denied for table kept")
            a.execute("INSERT INTO work.hers VALUES (1)")
        with connect(server, "bob") as b:
            assert b.execute("SELECT count(*) FROM kept").fetchone() == (2,)  # via team
            _denied(b, "INSERT INTO kept VALUES (3)", "permission denied for table kept")
            _denied(b, "DROP TABLE work.hers", "permission denied for schema work")
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            connect(server, "alice", password="wrong")
        with psycopg.connect(dsn(server), autocommit=True) as c:
            with pytest.raises(psycopg.errors.UndefinedObject):
                c.execute("ALTER ROLE gone LOGIN")
            c.execute("GRANT USAGE ON SCHEMA work TO bob")
        with connect(server, "bob") as b:
            _denied(b, "DROP TABLE work.hers", "must be owner of table hers")
        with connect(server, "alice") as a:
            a.execute("DROP TABLE work.hers")
    finally:
        server.stop()


def test_password_encryption_md5_and_pg_authid(
    sec: HeadwaterServer, su: psycopg.Connection[Any], alice: psycopg.Connection[Any]
) -> None:
    su.execute("SET password_encryption = 'md5'")
    su.execute("CREATE USER md5b PASSWORD 'md5b-Secret'")
    su.execute("RESET password_encryption")
    # the hba rule for md5b is scram-sha-256: an md5 hash cannot answer SCRAM
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        connect(sec, "md5b", password="md5b-Secret")
    su.execute("ALTER ROLE md5user PASSWORD 'md5-Secret-3'")  # SCRAM now: md5 rule uses SCRAM
    out = psql(
        dsn(sec, "md5user", sslmode="require"), "SELECT 'scram via md5 rule'", "md5-Secret-3"
    )
    assert out.returncode == 0 and out.stdout.strip() == "scram via md5 rule", out.stderr
    # password verifiers are for superusers only
    _denied(alice, "SELECT * FROM pg_authid", "permission denied for table pg_authid")
    _denied(alice, "SELECT * FROM pg_catalog.pg_authid", "permission denied for table pg_authid")
    su.execute("SELECT count(*) FROM pg_authid")
