"""`offline-mem serve` under hostile input: 1,000 malformed or unauthenticated requests (no
token, a wrong one, malformed JSON, wrong types, oversized and deeply nested bodies, lone
surrogates, another scope's ids, odd methods and paths: tests/server_hostile.py), then the
server still answering, the other scope's memory intact and `offline-mem verify` clean.

    .venv/bin/python -m benchmarks.server_hostile [--count 1000]

Fake models (the server's HTTP layer is what is measured). Issue 41's target: all 4xx, server
still answering, verify clean. Writes benchmarks/results/server_hostile.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from server_helpers import HELPER, serve  # noqa: E402
from server_hostile import hostile_requests  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/server_hostile.json")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "memory.db"
        with serve(db) as server:
            with server.client() as api:
                body = {"messages": "my secret", "user_id": "victim", "infer": False}
                [victim] = api.post("/memories", json=body).json()["results"]
            statuses: Counter[int] = Counter()
            by_kind: dict[str, Counter[int]] = {}
            errors = 0
            started = time.perf_counter()
            with httpx.Client(base_url=server.url, timeout=60) as raw:
                for hostile in hostile_requests(options.count, server.token, victim["id"]):
                    try:
                        status = raw.request(hostile.method, hostile.path,
                                             headers=hostile.headers, content=hostile.content,
                                             params=hostile.params).status_code  # fmt: skip
                    except httpx.HTTPError:
                        status, errors = 0, errors + 1
                    statuses[status] += 1
                    by_kind.setdefault(hostile.kind, Counter())[status] += 1
            elapsed = time.perf_counter() - started
            with server.client() as api:
                alive = api.get("/healthz").json()["status"] == "ok"
                intact = api.get(f"/memories/{victim['id']}").json()["memory"] == "my secret"
            exit_code = server.stop()
        log = server.log.read_text()
        verify = subprocess.run(
            [sys.executable, str(HELPER), "--fakes", "--", "--db", str(db), "verify"],
            capture_output=True, text=True, cwd=ROOT, timeout=600,
        )  # fmt: skip
    all_4xx = all(400 <= status < 500 for status in statuses)
    result = {
        "requests": options.count,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "by_kind": {k: {str(s): n for s, n in sorted(v.items())} for k, v in by_kind.items()},
        "connection_errors": errors,
        "all_4xx": all_4xx,
        "server_still_answering": alive,
        "other_scope_memory_intact": intact,
        "sigterm_exit_code": exit_code,
        "tracebacks_in_log": log.count("Traceback"),
        "verify_exit_code": verify.returncode,
        "seconds": round(elapsed, 2),
        "requests_per_s": round(options.count / elapsed, 1),
        "machine": f"{platform.machine()}, {platform.processor() or '?'}, python "
        f"{platform.python_version()}",
    }
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    ok = all_4xx and alive and intact and verify.returncode == 0 and not errors
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
