"""PostgreSQL for tests: the shared server on 127.0.0.1:5432 (scripts/ensure-postgres.sh makes sure
it answers; user postgres, trust) and scratch databases, each with a unique name, created by a
test (or a test module) and dropped after it, whatever happened; and a private server (password
authentication and TLS, which the shared one does not have) for the tests of those."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

HOST, PORT, USER = "127.0.0.1", 5432, "postgres"
ADMIN_CONNINFO = f"host={HOST} port={PORT} user={USER} dbname=postgres connect_timeout=5"
_ENSURE_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ensure-postgres.sh"


def ensure_server() -> None:
    """Start (or install) the server when none answers; returns at once when one does."""
    subprocess.run(["bash", str(_ENSURE_SCRIPT)], check=True)


def conninfo_of(name: str) -> str:
    """The superuser conninfo of database `name` (for a test's own reads and writes)."""
    return ADMIN_CONNINFO.replace("dbname=postgres", f"dbname={name}")


def database_url(name: str, **params: str) -> str:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"postgresql://{USER}@{HOST}:{PORT}/{name}" + (f"?{query}" if query else "")


@contextmanager
def scratch_database(prefix: str = "mcprt_test") -> Iterator[str]:
    """A new empty database; yields its name, drops it (closing its connections) afterwards."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(ADMIN_CONNINFO, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(ADMIN_CONNINFO, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def empty_tables(name: str) -> None:
    """Delete every row of every table of database `name` but the applied migrations: a clean
    store for the next test without creating a database (and migrating it) again."""
    async with await psycopg.AsyncConnection.connect(conninfo_of(name), autocommit=True) as connection:
        cursor = await connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'"
        )
        tables = [sql.Identifier(table) for (table,) in await cursor.fetchall()]
        async with connection.transaction():  # DELETE: TRUNCATE's new files cost ~30 ms a table
            for table in tables:
                await connection.execute(sql.SQL("DELETE FROM {}").format(table))


def _postgres_bin() -> Path:
    """The newest installed PostgreSQL's binaries (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[4]))
    assert found, "PostgreSQL is not installed (scripts/ensure-postgres.sh installs it)"
    return found[-1].parent


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificate_authority(directory: Path, name: str) -> Path:
    """A self-signed CA (`<name>.crt`, `<name>.key`) in `directory`; returns the certificate."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=directory)  # fmt: skip
    return directory / f"{name}.crt"


class PrivateServer:
    """A PostgreSQL cluster of a test's own on 127.0.0.1:`port`: password (SCRAM) authentication
    for every TCP connection, and TLS with a server certificate signed by `ca` (for 127.0.0.1 and
    localhost). Run as the `postgres` OS user when the tests run as root (PostgreSQL refuses root)."""

    def __init__(self, root: Path, port: int, password: str) -> None:
        self.root, self.port, self.password = root, port, password
        self.data = root / "data"
        self.ca = make_certificate_authority(root, "test-ca")
        self.process: subprocess.Popen[bytes] | None = None

    def _as_owner(self, argv: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return argv
        return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--", *argv]

    def _server_certificate(self) -> None:
        (self.root / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="utf-8")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                 "-keyout", "server.key", "-out", "server.csr", cwd=self.root)  # fmt: skip
        _openssl("x509", "-req", "-in", "server.csr", "-CA", "test-ca.crt", "-CAkey", "test-ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", "san.cnf", "-out", "server.crt",
                 cwd=self.root)  # fmt: skip
        (self.root / "server.key").chmod(0o600)

    def start(self) -> PrivateServer:
        bin_dir = _postgres_bin()
        self._server_certificate()
        (self.root / "pwfile").write_text(self.password, encoding="utf-8")
        if os.geteuid() == 0:
            for path in [self.root, *self.root.iterdir()]:
                shutil.chown(path, "postgres", "postgres")
        initdb = [str(bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres", "--no-sync",
                  f"--pwfile={self.root / 'pwfile'}", "--auth-local=trust",
                  "--auth-host=scram-sha-256"]  # fmt: skip
        subprocess.run(self._as_owner(initdb), check=True, capture_output=True)
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "fsync": "off",  # a test cluster: a power loss is not what is tested
            "ssl": "on",
            "ssl_cert_file": str(self.root / "server.crt"),
            "ssl_key_file": str(self.root / "server.key"),
        }
        options = [f"-c{key}={value}" for key, value in settings.items()]
        log = (self.root / "postgres.log").open("wb")
        self.process = subprocess.Popen(
            self._as_owner([str(bin_dir / "postgres"), "-D", str(self.data), *options]),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        ready = [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)]
        deadline = time.monotonic() + 60
        while subprocess.run(ready, check=False, capture_output=True).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log_text = (self.root / "postgres.log").read_text(errors="replace")
                raise AssertionError(f"the private PostgreSQL server did not start:\n{log_text}")
            time.sleep(0.05)  # polling another process: there is no event to wait on
        return self

    def conninfo(self, **params: str) -> str:
        """The superuser's conninfo over TCP (sslmode=require) with the password."""
        base = {"host": "127.0.0.1", "port": str(self.port), "user": "postgres", "dbname": "postgres",
                "password": self.password, "sslmode": "require", **params}  # fmt: skip
        return " ".join(f"{key}={value}" for key, value in base.items())

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown: disconnects what is left
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            self.process = None
