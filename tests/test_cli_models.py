"""`offline-mem models ...`: list, verify (exit 1 on a flipped byte), fetch, bundle → import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from models_fixtures import (
    EMBEDDER,
    copy_model,
    fake_model,
    flip_byte,
    populated_embedder_dir,
    write_files,
    write_manifest,
)

from offline_mem.cli import main
from offline_mem.config import checkout_models_dir
from offline_mem.errors import ModelIntegrityError
from offline_mem.pinned.manifest import read_manifest
from offline_mem.pinned.model_files import CACHE_NAME, verified_model_dir, verify_model

CHECKOUT_MANIFEST = checkout_models_dir() / "manifest.json"
FILES = {"weights.bin": b"tiny weights " * 50, "tokenizer/vocab.txt": b"a\nb\n"}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "models"
    write_manifest(directory, fake_model("tiny", FILES), fake_model("absent", {"x.bin": b"x"}))
    write_files(directory, "tiny", FILES)
    return directory


@pytest.fixture(scope="module")
def embedder_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return populated_embedder_dir(tmp_path_factory.mktemp("real"))


def test_list_shows_status_without_hashing(models_dir: Path) -> None:
    code, out, _ = run("models", "--models-dir", str(models_dir), "list")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines()[1:-1]}
    ours = {name: rows.pop(name) for name in ("tiny", "absent")}
    assert ours == {"tiny": ["embedder*", "unverified"], "absent": ["embedder*", "missing"]}
    # the folder's manifest adds its models to the package's pins, which are listed too
    assert set(rows) == set(read_manifest(CHECKOUT_MANIFEST).names)
    run("models", "--models-dir", str(models_dir), "verify", "--only", "tiny")
    code, out, _ = run("--json", "models", "--models-dir", str(models_dir), "list")
    listing = [m for m in json.loads(out)["models"] if m["name"] in ("tiny", "absent")]
    assert [(m["name"], m["status"]) for m in listing] == [
        ("tiny", "verified"),
        ("absent", "missing"),
    ]
    assert listing[0]["size"] == sum(len(b) for b in FILES.values())


def test_verify_passes_then_fails_on_a_flipped_byte(models_dir: Path) -> None:
    code, out, _ = run("models", "--models-dir", str(models_dir), "verify", "--skip-missing")
    assert (code, out) == (0, "ok       tiny (2 file(s))\n")
    flip_byte(models_dir / "tiny" / "weights.bin", offset=3)
    code, out, err = run("models", "--models-dir", str(models_dir), "verify", "--skip-missing")
    assert code == 1
    assert "FAILED   tiny" in out and "hash_mismatch" in out
    assert err == "error: 1 model(s) failed verification: tiny\n"


def test_verify_counts_missing_models_unless_told_to_skip_them(models_dir: Path) -> None:
    code, out, _ = run("models", "--models-dir", str(models_dir), "verify")
    assert code == 1 and "missing" in out and str(models_dir / "absent" / "x.bin") in out


def test_errors_are_one_line_unless_debug(models_dir: Path) -> None:
    code, _, err = run("models", "--models-dir", str(models_dir), "verify", "--only", "nope")
    assert code == 1
    assert err.startswith("error: unknown model 'nope'") and err.count("\n") == 1
    result = CliRunner().invoke(
        main, ["--debug", "models", "--models-dir", str(models_dir), "verify", "--only", "nope"]
    )
    assert result.exit_code == 1 and type(result.exception).__name__ == "ModelError"


def test_fetch_command_uses_the_fetch_code(models_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "other"
    write_manifest(target, fake_model("tiny", FILES))
    code, out, _ = run(
        "models", "--models-dir", str(target), "fetch", "--only", "tiny",
        "--source", f"local:{models_dir}",
    )  # fmt: skip
    assert code == 0 and "all 1 model(s) verified" in out
    assert verify_model("tiny", target).ok
    code, _, err = run("models", "--models-dir", str(target), "fetch", "--source", "ftp")
    assert code == 1 and "unknown source 'ftp'" in err


def test_bundle_then_import_into_an_empty_folder(models_dir: Path, tmp_path: Path) -> None:
    stick = tmp_path / "stick"
    code, out, _ = run("models", "--models-dir", str(models_dir), "bundle", str(stick))
    assert code == 0 and "bundled 1 model(s)" in out  # only the verified one
    assert read_manifest(stick / "manifest.json").names == ("tiny",)
    assert not (stick / CACHE_NAME).exists()
    target = tmp_path / "air-gapped"
    code, _, err = run("models", "--models-dir", str(target), "import", str(stick))
    assert code == 1 and "'tiny' is not in this machine's manifest" in err  # the checkout's
    assert not (target / "tiny").exists()
    trusting = ["models", "--models-dir", str(target), "import", "--trust-bundle-manifest"]
    code, out, _ = run(*trusting, str(stick))
    assert code == 0, out
    assert verified_model_dir("tiny", target) == target / "tiny"
    assert (target / "tiny" / "tokenizer" / "vocab.txt").read_bytes() == FILES[
        "tokenizer/vocab.txt"
    ]
    # the trusted model is now pinned by the folder's own manifest, beside the checkout's models
    assert read_manifest(target / "manifest.json").names[-1] == "tiny"
    code, out, _ = run("models", "--models-dir", str(target), "import", str(stick))
    assert code == 0 and "already installed and verified" in out


def test_import_refuses_a_tampered_bundle_and_installs_nothing(
    models_dir: Path, tmp_path: Path
) -> None:
    stick = tmp_path / "stick"
    run("models", "--models-dir", str(models_dir), "bundle", str(stick), "--only", "tiny")
    flip_byte(stick / "tiny" / "tokenizer" / "vocab.txt", offset=0)
    target = tmp_path / "air-gapped"
    write_manifest(target, fake_model("tiny", FILES))
    code, _, err = run("models", "--models-dir", str(target), "import", str(stick))
    assert code == 1
    assert err.startswith(f"error: {stick / 'tiny' / 'tokenizer' / 'vocab.txt'}: sha256 ")
    assert not (target / "tiny").exists()
    assert sorted(p.name for p in target.iterdir()) == ["manifest.json"]


def test_import_refuses_a_bundle_whose_manifest_disagrees(models_dir: Path, tmp_path: Path) -> None:
    stick = tmp_path / "stick"
    run("models", "--models-dir", str(models_dir), "bundle", str(stick), "--only", "tiny")
    target = tmp_path / "air-gapped"
    write_manifest(target, fake_model("tiny", {**FILES, "weights.bin": b"other weights"}))
    code, _, err = run("models", "--models-dir", str(target), "import", str(stick))
    assert code == 1 and "pins other files for 'tiny'" in err


@pytest.mark.real_model
def test_real_embedder_flipped_byte_fails_verify_and_load(
    embedder_source: Path, tmp_path: Path
) -> None:
    folder = copy_model(embedder_source, EMBEDDER, tmp_path)
    common = ["models", "--models-dir", str(tmp_path), "verify", "--only", EMBEDDER]
    assert run(*common)[0] == 0
    flip_byte(folder / "model.safetensors", offset=123_456)
    code, out, err = run(*common)
    assert code == 1
    assert (
        "hash_mismatch" in out
        and "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db" in out
    )
    assert "failed verification: all-MiniLM-L6-v2" in err
    with pytest.raises(ModelIntegrityError):
        verified_model_dir(EMBEDDER, tmp_path)


@pytest.mark.real_model
def test_real_embedder_bundle_import_round_trip(embedder_source: Path, tmp_path: Path) -> None:
    stick, target = tmp_path / "stick", tmp_path / "empty"
    code, _, _ = run(
        "models", "--models-dir", str(embedder_source), "bundle", str(stick), "--only", EMBEDDER
    )
    assert code == 0
    code, out, _ = run("models", "--models-dir", str(target), "import", str(stick))
    assert code == 0 and "10 file(s) verified and installed" in out
    assert verify_model(EMBEDDER, target).ok
    assert (target / CACHE_NAME).is_file()  # the import leaves the cache warm


def test_console_script_exit_code(models_dir: Path) -> None:
    flip_byte(models_dir / "tiny" / "weights.bin", offset=5)
    script = Path(sys.executable).with_name("offline-mem")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "offline_mem.cli"]
    done = subprocess.run(
        [*command, "models", "--models-dir", str(models_dir), "verify", "--only", "tiny"],
        capture_output=True,
        text=True,
        env={**os.environ, "OFFLINE_MEM_MODELS": str(checkout_models_dir())},
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
