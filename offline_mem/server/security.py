"""Who may talk to the server: the bearer token file, the loopback check on the address it binds,
and an ASGI middleware that refuses unauthenticated requests and oversized bodies before any
route runs.

The token file is created on first start with mode 0600 and holds one `TOKEN LABEL` per line;
the label names the client (an app's name) in the server's log. A file readable by group or
others is refused rather than trusted.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..store.writer import written_by

log = logging.getLogger("offline_mem.server")

MAX_BODY_BYTES = 1_000_000
DRAIN_BYTES = 8_000_000  # an oversized body up to this size is read and dropped before the 413
DEFAULT_LABEL = "default"
# A page that holds no data (the browser's HTML and script) is served without a token: the
# browser reads the token from the URL fragment the server prints, which is never sent.
PUBLIC_PATHS = frozenset({"/", "/favicon.ico"})

Scope = dict[str, Any]
Receive = Any
Send = Any


@dataclass(frozen=True)
class Token:
    secret: str
    label: str


def token_path_for(db_path: str) -> Path:
    """The default token file: beside the memory file, named after it."""
    db = Path(db_path)
    return db.with_name(db.name + ".token")


def load_or_create_tokens(path: Path) -> tuple[list[Token], bool]:
    """The tokens in `path`, creating the file with one new token when missing. Returns the
    tokens and whether the file was created."""
    created = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(f"{secrets.token_urlsafe(32)} {DEFAULT_LABEL}\n")
        created = True
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"{path} can be read by other users (mode {stat.S_IMODE(mode):o}); "
            f"chmod 600 {path} or remove it to have a new token made"
        )
    tokens = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields[0]) < 16:
            raise ConfigError(f"{path}:{number}: a token must be at least 16 characters")
        tokens.append(Token(fields[0], fields[1] if len(fields) > 1 else DEFAULT_LABEL))
    if not tokens:
        raise ConfigError(f"{path} holds no token")
    return tokens, created


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless the user asked for it by name."""
    if not is_loopback(host) and not allow_remote:
        raise ConfigError(
            f"--host {host} is reachable from other machines; pass --allow-remote as well "
            "if that is what you want (the token is then all that protects the memory)"
        )


def _token_of(headers: dict[bytes, bytes]) -> str | None:
    auth = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = headers.get(b"x-api-key")  # Mem0's server takes its API keys here
    return key.decode("latin-1").strip() if key else None


async def _send_json(send: Send, status: int, body: dict[str, Any], **extra: str) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def error_body(kind: str, detail: str) -> dict[str, str]:
    """The JSON of every refused request: Mem0's `detail`, and the error's type."""
    return {"error": kind, "detail": detail}


class Guard:
    """ASGI middleware: a known token on every request but the public page; a body of at most
    `max_body` bytes, read whole before the app runs (so the app never sees a partial one).
    The token's label is put in the scope's state as `actor`."""

    def __init__(self, app: Any, tokens: list[Token], max_body: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.tokens = tokens
        self.max_body = max_body

    def _label(self, given: str | None) -> str | None:
        if given is None:
            return None
        found = None
        for token in self.tokens:  # compare with every token, in constant time each
            if hmac.compare_digest(token.secret.encode(), given.encode("utf-8", "replace")):
                found = token.label
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        public = scope["method"] in ("GET", "HEAD") and scope["path"] in PUBLIC_PATHS
        label = self._label(_token_of(headers))
        if label is None and not public:
            await _send_json(
                send, 401, error_body("Unauthorized", "a valid bearer token is required"),
                **{"www-authenticate": "Bearer"},
            )  # fmt: skip
            return
        scope.setdefault("state", {})["actor"] = label
        too_large = error_body("PayloadTooLarge", f"the body must be at most {self.max_body} bytes")
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > DRAIN_BYTES):
            await _send_json(send, 413, too_large)  # not read: the client may see a reset
            return
        body = bytearray()
        size = 0
        more = scope["method"] not in ("GET", "HEAD", "OPTIONS")
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= self.max_body:
                body += chunk
            more = message.get("more_body", False) and size <= DRAIN_BYTES
        if size > self.max_body:
            # read (up to DRAIN_BYTES) and dropped, so the client reads the 413, not a reset
            await _send_json(send, 413, too_large)
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        with written_by(label):  # the REST routes' writes are recorded as this token's app
            await self.app(scope, replay, send)
