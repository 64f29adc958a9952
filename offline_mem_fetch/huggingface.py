"""Hugging Face: huggingface-hub at the manifest's pinned revision.

Before any download, one TCP connection to the endpoint is tried with a short timeout, so that a
machine that cannot reach the Hub moves on to the next source in seconds. `HF_ENDPOINT` (honoured
by huggingface-hub) points the source at a mirror or a test server.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from offline_mem.pinned.manifest import HuggingFaceSource, ModelFile, ModelSpec
from offline_mem.pinned.model_files import sha256_file

from .sources import Deliver, Log, SourceError, human_size

DEFAULT_ENDPOINT = "https://huggingface.co"


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def probe(url: str, timeout: float) -> None:
    """Raise SourceError unless a TCP connection to `url`'s host opens within `timeout`."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except Exception as exc:  # DNS failure, refusal, timeout, or a sandbox that forbids sockets
        raise SourceError(f"cannot reach {host}:{port} ({exc or type(exc).__name__})") from exc


def fetch_huggingface(
    spec: ModelSpec,
    source: HuggingFaceSource,
    needed: list[ModelFile],
    stage: Path,
    deliver: Deliver,
    log: Log,
    *,
    timeout: float,
) -> None:
    url = endpoint()
    probe(url, timeout)
    try:
        from huggingface_hub import constants
    except ImportError as exc:
        raise SourceError(
            "huggingface-hub is not installed (pip install 'offline_mem[fetch]')"
        ) from exc
    if constants.HF_HUB_OFFLINE:
        raise SourceError("HF_HUB_OFFLINE is set")
    # huggingface-hub reads HF_ENDPOINT once, at import, and sends some requests of its own (an
    # "agent harness" registry for its user agent) to that endpoint: pin it to the one probed.
    saved = constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE
    constants.ENDPOINT = url
    constants.HUGGINGFACE_CO_URL_TEMPLATE = url + "/{repo_id}/resolve/{revision}/{filename}"
    try:
        _download(spec, source, needed, stage / f"hf-{spec.name}", deliver, log, url, timeout)
    finally:
        constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE = saved


def _download(
    spec: ModelSpec,
    source: HuggingFaceSource,
    needed: list[ModelFile],
    local_dir: Path,
    deliver: Deliver,
    log: Log,
    url: str,
    timeout: float,
) -> None:
    from huggingface_hub import hf_hub_download

    for model_file in needed:
        remote = source.remote_path(model_file.path)
        if remote is None:
            raise SourceError(f"the source does not map {model_file.path}")
        log(
            f"  huggingface: {source.repo}@{source.revision[:12]} {remote}"
            f" ({human_size(model_file.size)})"
        )
        try:
            downloaded = hf_hub_download(
                source.repo,
                remote,
                revision=source.revision,
                local_dir=local_dir,
                etag_timeout=timeout,
                endpoint=url,
            )
        except Exception as exc:  # huggingface-hub raises many kinds; each means "not from here"
            raise SourceError(f"{remote}: {type(exc).__name__}: {_first_line(exc)}") from exc
        path = Path(downloaded)
        deliver(model_file, path, sha256_file(path))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
