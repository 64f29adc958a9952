"""Hostile requests for `offline-mem serve`: no token, a wrong one, malformed JSON, wrong types,
oversized and deeply nested bodies, odd methods and paths, lone surrogates, another scope's ids.
`hostile_requests(n, ...)` yields n of them, cycling through every kind in a seeded order;
tests/test_server_hostile.py sends a few hundred, benchmarks/server_hostile.py 1,000."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_BODY = 1_000_000
ODD_IDS = ["%00", "..%2F..", "a" * 5000, "%20", "%ED%A0%80", "%FF"]


@dataclass
class Hostile:
    kind: str
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | Iterator[bytes] | None = None
    params: dict[str, str] | None = None


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def kinds(token: str, foreign_id: str) -> dict[str, Callable[[random.Random], Hostile]]:
    """Each kind of hostile request; `foreign_id` is a memory of a scope other than 'mallory'."""
    auth = {"Authorization": f"Bearer {token}"}
    typed = {"Content-Type": "application/json", **auth}
    return {
        "no token": lambda r: Hostile("no token", "GET", "/memories", params={"user_id": "a"}),
        "wrong token": lambda r: Hostile("wrong token", "POST", "/search", {
            "Authorization": "Bearer " + "".join(r.choice("abcdef0123") for _ in range(43))},
            _json({"query": "q", "user_id": "a"})),
        "basic auth": lambda r: Hostile("basic auth", "GET", "/healthz",
                                        {"Authorization": "Basic YWRtaW46YWRtaW4="}),
        "token in query": lambda r: Hostile("token in query", "GET", "/healthz",
                                            params={"token": token}),
        "malformed json": lambda r: Hostile("malformed json", "POST", "/memories", typed,
                                            b'{"messages": [' + bytes(r.randrange(256)
                                                                      for _ in range(20))),
        "not an object": lambda r: Hostile("not an object", "POST", "/search", typed,
                                           _json(r.choice([[], "q", 3, None, True]))),
        "wrong types": lambda r: Hostile("wrong types", "POST", "/memories", typed, _json({
            "messages": r.choice([5, 3.5, True, {"role": 3}, [{"role": "user", "content": 7}]]),
            "user_id": r.choice(["a", 5, [], {"x": 1}, "", " ", "a b"]),
            "infer": r.choice([True, "no", 2]),
        })),
        "search types": lambda r: Hostile("search types", "POST", "/search", typed, _json({
            "query": r.choice(["", 5, None, ["q"]]), "user_id": "a",
            "top_k": r.choice([-1, "x", 10**9, 1.5]),
        })),
        "bad filters": lambda r: Hostile("bad filters", "POST", "/search", typed, _json({
            "query": "q", "filters": r.choice([{"user_id": "a", "x": {"$where": 1}},
                                               {"AND": "x"}, {"user_id": {"in": 3}}, []]),
        })),
        "unknown field": lambda r: Hostile("unknown field", "POST", "/memories", typed,
                                           _json({"messages": "hi", "user_id": "a",
                                                  "__proto__": {"admin": True}})),
        "huge body": lambda r: Hostile("huge body", "POST", "/memories", typed,
                                       b'{"messages": "' + b"x" * (MAX_BODY + 10) + b'"}'),
        "huge chunked": lambda r: Hostile("huge chunked", "PUT", "/memories/x", typed,
                                          iter([b"x" * 300_000] * 4)),  # no Content-Length
        "deep nesting": lambda r: Hostile("deep nesting", "POST", "/search", typed,
                                          b"[" * 100_000 + b"]" * 100_000),
        "deep metadata": lambda r: Hostile("deep metadata", "POST", "/memories", typed,
                                           b'{"messages": "hi", "user_id": "a", "metadata": '
                                           + b'{"a": ' * 5000 + b"1" + b"}" * 5001),
        "lone surrogate": lambda r: Hostile("lone surrogate", "POST", "/memories", typed,
                                            b'{"messages": "\\ud800 hi", "user_id": "\\udfff"}'),
        "another scope's id": lambda r: Hostile(
            "another scope's id", r.choice(["GET", "DELETE", "PUT"]), f"/memories/{foreign_id}",
            typed, _json({"text": "pwned"}), {"user_id": "mallory"}),
        "missing id": lambda r: Hostile("missing id", r.choice(["GET", "DELETE"]),
                                        f"/memories/{r.getrandbits(64):x}", auth),
        "odd id": lambda r: Hostile("odd id", "GET", "/memories/" + r.choice(ODD_IDS), auth),
        "bad query param": lambda r: Hostile("bad query param", "GET", "/memories", auth,
                                             params={"user_id": "a", "top_k": r.choice(
                                                 ["ten", "-5", "1e9", ""])}),
        "odd scope param": lambda r: Hostile("odd scope param", "GET", "/memories?user_id="
                                             + r.choice(["a%20b", "%20", "a%09b", "x%0Ay"]),
                                             auth),
        "bad method": lambda r: Hostile("bad method", r.choice(["PATCH", "PUT", "DELETE"]),
                                        r.choice(["/search", "/healthz", "/reset"]), auth),
        "no route": lambda r: Hostile("no route", "GET",
                                      r.choice(["/admin", "/memories/a/b/c", "/.env"]), auth),
        "configure": lambda r: Hostile("configure", "POST", "/configure", typed,
                                       _json({"llm": {"provider": "openai"}})),
        "mcp garbage": lambda r: Hostile("mcp garbage", "POST", "/mcp", typed, _json({"x": 1})),
        "unknown job": lambda r: Hostile("unknown job", "GET", f"/jobs/{r.getrandbits(32)}", auth),
    }  # fmt: skip


def hostile_requests(n: int, token: str, foreign_id: str, seed: int = 41) -> Iterator[Hostile]:
    """n hostile requests: every kind in turn, each built with the seeded generator."""
    rng = random.Random(seed)
    made = list(kinds(token, foreign_id).values())
    for i in range(n):
        yield made[i % len(made)](rng)
