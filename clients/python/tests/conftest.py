"""The fixture every test runs against: a real `cairn serve` on a fresh temporary file
(`$CAIRN_BIN`, else the workspace's `target/debug/cairn`), stopped and restarted on the same
address by `Server.restart`. It is served with the key ring `Server.keys` as `CAIRN_KEYS`
(none by default: `CAIRN_KEYS` and `CAIRN_KEYS_FILE` are not passed on)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Optional

import pytest

from cairn_client import Client

REPO = Path(__file__).resolve().parents[3]


def cairn_bin() -> str:
    given = os.environ.get("CAIRN_BIN")
    path = Path(given) if given else REPO / "target" / "debug" / "cairn"
    if not path.exists():
        pytest.fail(f"no cairn binary at {path}: build it (cargo build -p cairn-tools "
                    f"--all-features --bin cairn) or set CAIRN_BIN")
    return str(path)


class Server:
    """`cairn serve --db FILE --json`: its address, token and process."""

    def __init__(self, db: Path, keys: Optional[str] = None):
        self.db = db
        self.addr = "127.0.0.1:0"
        self.process = None
        #: The key ring the next start serves with (`CAIRN_KEYS`, docs/encryption.md), or none.
        self.keys = keys
        # A fresh file: `cairn serve` opens an existing database only.
        self.cli("init", stdout=subprocess.DEVNULL)
        self.start()

    def env(self) -> Dict[str, str]:
        """The environment of a command on the file: this one's, with `keys` as the only ring."""
        env = {k: v for k, v in os.environ.items() if k not in ("CAIRN_KEYS", "CAIRN_KEYS_FILE")}
        if self.keys is not None:
            env["CAIRN_KEYS"] = self.keys
        return env

    def cli(self, *args: str, **run) -> subprocess.CompletedProcess:
        """`cairn ARGS... --db FILE`, which must succeed (a command that writes needs the server
        stopped: the file is held while it serves)."""
        return subprocess.run([cairn_bin(), *args, "--db", str(self.db)], check=True,
                              env=self.env(), **run)

    def start(self) -> None:
        args = [cairn_bin(), "serve", "--db", str(self.db), "--addr", self.addr, "--json"]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        env=self.env())
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(10)
            pytest.fail(f"cairn serve exited {self.process.returncode} without an address")
        announced = json.loads(line)
        if "address" not in announced:
            pytest.fail(f"cairn serve did not start: {announced}")
        self.addr, self.token = announced["address"], announced["token"]
        self.url = f"http://{self.addr}"

    def stop(self) -> None:
        """Stops it as an operator would (SIGTERM: a graceful shutdown)."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(30)
        if self.process:
            self.process.stdout.close()

    def restart(self) -> None:
        """Stops it and serves the same file again on the same address."""
        self.stop()
        self.start()

    def client(self, **kwargs) -> Client:
        kwargs.setdefault("token", self.token)
        return Client(self.url, **kwargs)


@pytest.fixture
def server():
    with tempfile.TemporaryDirectory(prefix="cairn-py-") as tmp:
        s = Server(Path(tmp) / "cairn.db")
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture
def client(server) -> Client:
    return server.client()
