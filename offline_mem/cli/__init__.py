"""The `offline-mem` command line.

`main` is a click group with the global options; each command group lives in its own module
and is registered at the bottom of this file. Errors of offline_mem become one-line messages and a
non-zero exit; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import click

from ..config import is_postgres_url
from ..errors import OfflineMemError
from ..pinned.process_tuning import claim_process
from .common import CliState

EXIT_ERROR = 1


class _Main(click.Group):
    """A group that turns any failure of a command into one line on stderr."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:
            state = ctx.find_object(CliState)
            if state is not None and state.debug:
                raise
            prefix = (
                "" if isinstance(exc, OfflineMemError) else f"unexpected {type(exc).__name__}: "
            )
            click.echo(f"error: {prefix}{_one_line(exc)}", err=True)
            if not isinstance(exc, OfflineMemError):
                click.echo("(run with --debug for the traceback)", err=True)
            sys.exit(EXIT_ERROR)


def run() -> None:
    """The `offline-mem` program: the process is offline_mem's own, so its process-wide speed
    settings are allowed (pinned/process_tuning.py); then `main`, then an exit that skips the
    garbage collector's last passes over every object the models made (spaCy's vocabulary, the
    embedder's weights): measured 0.40 s of a 2.7 s cold search on this 2-core machine, 0.05 s
    frozen. Files and connections are closed by the commands themselves, before this."""
    claim_process()
    try:
        main()
    finally:
        gc.freeze()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    envvar="OFFLINE_MEM_DB",
    metavar="FILE|URL",
    help="The memory file (default $OFFLINE_MEM_DB, else ~/.local/share/offline_mem/memory.db), "
    "or a PostgreSQL database's postgresql:// URL.",
)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def main(ctx: click.Context, db: str | None, as_json: bool, debug: bool) -> None:
    """offline_mem: agent memory that never leaves the machine."""
    where: Path | str | None = db
    if db is not None and not is_postgres_url(db):
        where = Path(db)  # a URL stays as given: a Path would fold its "//"
    ctx.obj = CliState(db=where, json=as_json, debug=debug)


# Command groups, one module each.
from .models import models  # noqa: E402

main.add_command(models)
from . import admin, memories  # noqa: E402
from .chat import chat  # noqa: E402
from .mcp import mcp  # noqa: E402
from .serve import serve  # noqa: E402

memories.register(main)
admin.register(main)
main.add_command(chat)
main.add_command(mcp)
main.add_command(serve)
