"""What every command module shares: the global options and how results are printed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click


@dataclass(frozen=True)
class CliState:
    """The global options of `offline-mem`, available to every command as `ctx.obj`."""

    db: Path | None = None
    json: bool = False
    debug: bool = False


pass_state = click.make_pass_decorator(CliState, ensure=True)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
