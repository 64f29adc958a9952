"""`offline-mem ... mcp ...` for the MCP tests, in a process of its own, with fake models or under a
network audit.

    python tests/mcp_server_process.py [--fakes] [--fact TEXT]... [--audit FILE] -- CLI_ARGS...

--fakes: every model is a fake (FakeEmbedder, FakeEntities, a FakeExtractor), so the server is up
in about a second; the extractor answers each inferred add with the --fact texts. Without it the
configured, pinned models load (the extractor only on an inferred add, and --fact then scripts it).
--slow SECONDS: the fake extractor takes this long per call (jobs still queued at a signal).
--audit FILE: a Python audit hook appends every socket connect, bind (a listening server), DNS
lookup and send (Unix sockets aside) to FILE as it happens, one line each, after a first line
"armed" (stdout is the protocol, so the report cannot go there; written at once, it survives the
client killing the server).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path
from typing import Any

WATCHED = {
    "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg", "http.client.connect",
    "urllib.Request",
}  # fmt: skip


def audit_to(report: Path) -> None:
    report.write_text("armed\n")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event not in WATCHED:
            return
        if event in ("socket.connect", "socket.bind") and args[0].family == socket.AF_UNIX:
            return
        if event == "socket.bind" and args[1] in (("::1", 0), ("127.0.0.1", 0)):
            return  # urllib3's IPv6 probe at import (via spaCy's requests): no port, no peer
        with report.open("a") as out:
            out.write(json.dumps(f"{event} {args[1:]!r}"[:200]) + "\n")

    sys.addaudithook(hook)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fakes", action="store_true")
    parser.add_argument("--fact", action="append", default=[])
    parser.add_argument("--audit", type=Path)
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("cli", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    if options.audit is not None:
        audit_to(options.audit)  # before offline_mem is imported

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from offline_mem.cli import common
    from offline_mem.cli import main as cli_main
    from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer

    facts = [answer(*options.fact)] * 100 if options.fact else []
    fake_extractor = (lambda name: FakeExtractor(*facts)) if options.fact or options.fakes else None
    if options.slow:
        import time

        def slow_answer(prompt: object) -> dict[str, object]:
            time.sleep(options.slow)
            return facts[0] if facts else {}

        fake_extractor = lambda name: FakeExtractor(*[slow_answer] * 100)  # noqa: E731
    if options.fakes:
        common.MODELS = common.CliModels(
            embedder=FakeEmbedder, extractor=fake_extractor, entities=FakeEntities
        )
    else:
        common.MODELS = common.CliModels(extractor=fake_extractor)
    args = options.cli[1:] if options.cli[:1] == ["--"] else options.cli
    cli_main(args, prog_name="offline-mem")


if __name__ == "__main__":
    main()
