"""Run tests/test_fuzz_refusals.py with N generated inputs per test (filters, metadata, export
lines) and print the totals as JSON: inputs accepted, refused with an OfflineMemError, and
whether pytest passed (an untyped exception, or a refusal that changed the file, fails it).

    OFFLINE_MEM_MODELS=... .venv/bin/python benchmarks/fuzz_refusals.py 3334
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    per_test = int(sys.argv[1]) if len(sys.argv) > 1 else 3334
    os.environ["OFFLINE_MEM_FUZZ_EXAMPLES"] = str(per_test)
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import pytest

    started = time.perf_counter()
    code = pytest.main(["-q", "-p", "no:cacheprovider", str(ROOT / "tests/test_fuzz_refusals.py")])
    import test_fuzz_refusals

    tally = test_fuzz_refusals.TALLY
    total = sum(c["ok"] + c["refused"] for c in tally.values())
    print(json.dumps({
        "examples_per_test": per_test,
        "inputs": total,
        "by_test": tally,
        "pytest_passed": code == 0,
        "untyped_exceptions": 0 if code == 0 else "see the failures above",
        "seconds": round(time.perf_counter() - started, 1),
    }, indent=2))  # fmt: skip
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
