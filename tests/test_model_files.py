"""Verification at load: missing files, changed bytes, and the hash cache that makes it free."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from models_fixtures import (
    EMBEDDER,
    copy_model,
    fake_model,
    flip_byte,
    populated_embedder_dir,
    sha256,
    write_files,
    write_manifest,
)

import offline_mem.pinned.model_files as model_files
from offline_mem.errors import ModelIntegrityError, ModelNotFoundError
from offline_mem.pinned.manifest import load_manifest
from offline_mem.pinned.model_files import (
    CACHE_NAME,
    ModelIdentity,
    files_digest,
    model_identity,
    verified_model_dir,
    verify_model,
)

FILES = {"weights.bin": b"\x00\x01tiny weights" * 100, "sub/config.json": b"{}"}


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "models"
    write_manifest(directory, fake_model("tiny", FILES))
    return directory


@pytest.fixture
def hash_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    calls: list[Path] = []
    real = model_files.sha256_file

    def counting(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(model_files, "sha256_file", counting)
    return calls


def test_missing_model_names_the_file_and_the_fix(models_dir: Path) -> None:
    with pytest.raises(ModelNotFoundError) as caught:
        verified_model_dir("tiny", models_dir)
    message = str(caught.value)
    assert str(models_dir / "tiny" / "weights.bin") in message
    assert "and 1 more file" in message
    assert "scripts/fetch_models --only tiny" in message
    assert isinstance(caught.value, FileNotFoundError)


def test_one_missing_file_is_enough_to_refuse(models_dir: Path) -> None:
    write_files(models_dir, "tiny", {"weights.bin": FILES["weights.bin"]})
    with pytest.raises(ModelNotFoundError, match=r"sub/config\.json is missing;"):
        verified_model_dir("tiny", models_dir)


def test_verified_load_is_cached_on_stat(models_dir: Path, hash_calls: list[Path]) -> None:
    write_files(models_dir, "tiny", FILES)
    assert verified_model_dir("tiny", models_dir) == models_dir / "tiny"
    assert len(hash_calls) == 2
    cache = json.loads((models_dir / CACHE_NAME).read_text())
    entry = cache["files"]["tiny/weights.bin"]
    stat = (models_dir / "tiny" / "weights.bin").stat()
    assert entry == {
        "sha256": sha256(FILES["weights.bin"]),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "inode": stat.st_ino,
    }
    hash_calls.clear()
    assert verified_model_dir("tiny", models_dir) == models_dir / "tiny"
    assert hash_calls == []


def test_changed_bytes_of_the_same_size_are_refused_after_caching(
    models_dir: Path, hash_calls: list[Path]
) -> None:
    write_files(models_dir, "tiny", FILES)
    verified_model_dir("tiny", models_dir)
    weights = models_dir / "tiny" / "weights.bin"
    flip_byte(weights, offset=10)  # same size, new mtime/ctime: the cache no longer vouches
    hash_calls.clear()
    with pytest.raises(ModelIntegrityError) as caught:
        verified_model_dir("tiny", models_dir)
    assert hash_calls == [weights]
    assert caught.value.path == str(weights)
    assert caught.value.expected == sha256(FILES["weights.bin"])
    assert caught.value.actual == model_files.sha256_file(weights)
    assert "does not match the manifest" in str(caught.value)


def test_a_replaced_file_is_hashed_again(models_dir: Path, hash_calls: list[Path]) -> None:
    write_files(models_dir, "tiny", FILES)
    verified_model_dir("tiny", models_dir)
    weights = models_dir / "tiny" / "weights.bin"
    replacement = weights.with_name("copy")
    shutil.copy2(weights, replacement)  # same bytes and mtime, another inode
    os.replace(replacement, weights)
    hash_calls.clear()
    verified_model_dir("tiny", models_dir)
    assert hash_calls == [weights]


def test_wrong_size_is_refused_with_the_size(models_dir: Path) -> None:
    write_files(models_dir, "tiny", {**FILES, "weights.bin": FILES["weights.bin"][:-1]})
    with pytest.raises(ModelIntegrityError, match=r"size 1399, expected 1400"):
        verified_model_dir("tiny", models_dir)


def test_a_corrupt_cache_is_ignored(models_dir: Path) -> None:
    write_files(models_dir, "tiny", FILES)
    (models_dir / CACHE_NAME).write_text("{garbage")
    assert verified_model_dir("tiny", models_dir) == models_dir / "tiny"
    assert json.loads((models_dir / CACHE_NAME).read_text())["format"] == 1


def test_a_forged_cache_entry_does_not_vouch_for_other_bytes(models_dir: Path) -> None:
    write_files(models_dir, "tiny", {**FILES, "weights.bin": b"X" * len(FILES["weights.bin"])})
    weights = models_dir / "tiny" / "weights.bin"
    verify_model("tiny", models_dir)  # records the real (wrong) hash
    cache = json.loads((models_dir / CACHE_NAME).read_text())
    assert cache["files"]["tiny/weights.bin"]["sha256"] == sha256(weights.read_bytes())
    with pytest.raises(ModelIntegrityError):
        verified_model_dir("tiny", models_dir)


def test_full_verify_rehashes_despite_the_cache(models_dir: Path, hash_calls: list[Path]) -> None:
    write_files(models_dir, "tiny", FILES)
    verified_model_dir("tiny", models_dir)
    hash_calls.clear()
    quick = verify_model("tiny", models_dir, full=False)
    assert quick.ok and all(check.cached for check in quick.files) and hash_calls == []
    full = verify_model("tiny", models_dir)
    assert full.ok and not any(check.cached for check in full.files) and len(hash_calls) == 2


def test_verify_reports_each_file(models_dir: Path) -> None:
    write_files(models_dir, "tiny", {"weights.bin": b"wrong"})
    report = verify_model("tiny", models_dir)
    statuses = {check.expected.path: check.status for check in report.files}
    assert statuses == {"weights.bin": "size_mismatch", "sub/config.json": "missing"}
    assert not report.ok and len(report.missing) == 1 and len(report.mismatched) == 1


def test_model_identity_is_the_primary_file_hash(models_dir: Path) -> None:
    spec = load_manifest(models_dir).get("tiny")
    assert model_identity("tiny", models_dir) == ModelIdentity(
        name="tiny", sha256=sha256(FILES["weights.bin"]), dimension=8,
        files_sha256=files_digest(spec),
    )  # fmt: skip
    changed = replace(spec, files=(spec.files[0], replace(spec.files[1], sha256="0" * 64)))
    assert files_digest(changed) != files_digest(spec)  # any file, not only the weights


def test_verified_model_dir_follows_the_environment(
    models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_files(models_dir, "tiny", FILES)
    monkeypatch.setenv("OFFLINE_MEM_MODELS", str(models_dir))
    assert verified_model_dir("tiny") == models_dir / "tiny"


@pytest.fixture(scope="module")
def embedder_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return populated_embedder_dir(tmp_path_factory.mktemp("real"))


@pytest.mark.real_model
def test_real_embedder_verifies_and_loads_offline(embedder_source: Path, tmp_path: Path) -> None:
    copy_model(embedder_source, EMBEDDER, tmp_path)
    folder = verified_model_dir(EMBEDDER, tmp_path)
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    assert model.encode(["the weights are the program"]).shape == (1, 384)
    identity = model_identity(EMBEDDER, tmp_path)
    assert identity.sha256.startswith("53aa5117") and identity.dimension == 384


@pytest.mark.real_model
def test_real_embedder_with_one_byte_flipped_is_refused(
    embedder_source: Path, tmp_path: Path
) -> None:
    folder = copy_model(embedder_source, EMBEDDER, tmp_path)
    weights = folder / "model.safetensors"
    flip_byte(weights, offset=1_000_000)
    with pytest.raises(ModelIntegrityError) as caught:
        verified_model_dir(EMBEDDER, tmp_path)
    assert caught.value.path == str(weights)
    assert caught.value.expected == (
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    )
    assert caught.value.actual == model_files.sha256_file(weights) != caught.value.expected
