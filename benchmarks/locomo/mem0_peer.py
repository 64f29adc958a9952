"""Mem0 2.2.1, configured fully locally, for the side-by-side benchmark.

- LLM: the same pinned GGUF, served by llama-cpp-python's OpenAI-compatible server on 127.0.0.1
  (n_ctx 16384: Mem0's extraction system prompt alone is ~7,900 tokens), seed fixed, chat format
  from the manifest; Mem0's `openai` provider pointed at it, temperature 0.
- Embedder: Mem0's `huggingface` provider on the same all-MiniLM-L6-v2 folder, hub offline.
- Vector store: Qdrant on disk (`path=`), in a temporary folder.
- Telemetry off (MEM0_TELEMETRY=False), MEM0_DIR in the temporary folder (Mem0 writes
  ~/.mem0/config.json at import otherwise).
- No BM25: Mem0's keyword search needs `fastembed`, whose model comes from a hub.
- spaCy: Mem0 loads `en_core_web_sm` by name; a tiny package of that name (made in a temporary
  folder on sys.path, with dist-info so spacy.util.is_package sees it) returns the pinned pipeline.

Mem0 OSS rejects `timestamp=`, so each add carries the session date in its metadata, and the
answer prompt shows that date (the same date offline_mem records as observed_at).
"""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

SPACY_SHIM = '''"""Stand-in for the en_core_web_sm package: loads the pinned pipeline folder."""
import spacy

PATH = {path!r}


def load(**overrides):
    return spacy.load(PATH, **overrides)
'''


def install_spacy_shim(folder: Path, pipeline_dir: Path) -> Path:
    """Make `spacy.load("en_core_web_sm")` load `pipeline_dir`, for this process only."""
    package = folder / "en_core_web_sm"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(SPACY_SHIM.format(path=str(pipeline_dir)))
    info = folder / "en_core_web_sm-3.8.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: en_core_web_sm\nVersion: 3.8.0\n")
    (info / "top_level.txt").write_text("en_core_web_sm\n")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def read_peak_rss_kib(pid: int) -> int | None:
    """VmHWM of a live process, in KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class LlamaServer:
    """`python -m llama_cpp.server` on 127.0.0.1, started and stopped by this process."""

    def __init__(
        self,
        model_path: Path,
        *,
        chat_format: str,
        alias: str,
        n_ctx: int = 16384,
        threads: int = 2,
        seed: int = 1234,
        log_path: Path | None = None,
    ) -> None:
        self.model_path, self.chat_format, self.alias = model_path, chat_format, alias
        self.n_ctx, self.threads, self.seed = n_ctx, threads, seed
        self.log_path = log_path
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.peak_rss_kib: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 300.0) -> None:
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.alias,
            "--chat_format",
            self.chat_format,
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
            "--seed",
            str(self.seed),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--verbose",
            "False",
            # the server's default keeps logits for every token of the context (n_ctx x vocab
            # floats, ~10 GB at 16384) for logprobs that Mem0 never asks for
            "--logits_all",
            "False",
        ]
        log = open(self.log_path or os.devnull, "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout_s}s")

    def stop(self) -> None:
        if self.process is None:
            return
        self.peak_rss_kib = read_peak_rss_kib(self.process.pid) or self.peak_rss_kib
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def mem0_config(
    *,
    base_url: str,
    alias: str,
    embedder_dir: Path,
    dimension: int,
    workdir: Path,
    callback: Any = None,
) -> dict[str, Any]:
    llm: dict[str, Any] = {
        "model": alias,
        "openai_base_url": base_url,
        "api_key": "local",
        "temperature": 0.0,
    }
    if callback is not None:
        llm["response_callback"] = callback
    return {
        "llm": {"provider": "openai", "config": llm},
        "embedder": {
            "provider": "huggingface",
            "config": {
                "model": str(embedder_dir),
                "embedding_dims": dimension,
                "model_kwargs": {"device": "cpu", "local_files_only": True},
            },
        },
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "bench",
                "path": str(workdir / "qdrant"),
                "embedding_model_dims": dimension,
                "on_disk": True,
            },
        },
        "history_db_path": str(workdir / "history.db"),
    }


def patient_client(memory: Any, timeout_s: float = 3600.0) -> None:
    """The openai client's defaults (600 s timeout, 2 retries) would resend a slow extraction to
    a local server that is still computing the first one; wait instead, and never retry."""
    memory.llm.client = memory.llm.client.with_options(timeout=timeout_s, max_retries=0)


def prepare_environment(workdir: Path) -> None:
    """Environment Mem0 and its libraries read at import: no telemetry, no hub, no home dir."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(workdir / "mem0_home")
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[key] = "1"
    # the openai client must not pick up a proxy or a real key from the environment
    os.environ.pop("OPENAI_BASE_URL", None)
