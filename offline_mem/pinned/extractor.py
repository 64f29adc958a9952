"""Extractors: one abstract method, `extract(prompt) -> ExtractionOutput`.

`LlamaExtractor` runs the pinned GGUF through llama-cpp-python. It loads on first use and stays
warm for the life of the `Memory`, so consecutive calls share llama.cpp's KV cache (only the
changed suffix of a prompt is evaluated); each kind of prompt keeps its own cached sequence
(`kv_slots.py`), so a supersession check does not evict the facts prompt. Decoding is greedy
under a grammar (`decoding.py`); the chat format comes from the manifest, never guessed; the
answer's JSON schema is compiled to a GBNF grammar explicitly and checked against the model's
vocabulary before the first call, so a schema that does not compile fails loudly instead of
falling back to generic JSON. Any model failure, timeout or answer outside the schema is an
`ExtractionError`; an answer cut at its token limit keeps the values it finished
(json_prefix.py) and is marked `truncated`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..errors import ExtractionError, ModelError
from .decoding import GrammarSampler, decode_greedy, next_token_logits
from .json_prefix import complete_prefix
from .kv_slots import KvSlots
from .llama_quiet import llama_logs_to_logging, load_llama
from .model_thread import ModelThread

DEFAULT_SEED = 1234
DEFAULT_N_CTX = 8192
DEFAULT_TIMEOUT_S = 300.0
# The prompt batch of reproducible mode: fixed, so that a prompt is always cut into the same
# batches (llama.cpp's result can depend on how a prompt was split).
REPRODUCIBLE_N_BATCH = 512

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExtractorIdentity:
    """What a memory records about the model that wrote it."""

    name: str
    sha256: str


@dataclass(frozen=True)
class Prompt:
    """A chat to complete and the JSON schema its answer must follow.

    `messages` are {"role", "content"} dicts, the static part first. `kind` names the task
    ("facts", "procedural") for fakes and logs."""

    kind: str
    messages: tuple[Mapping[str, str], ...]
    schema: Mapping[str, Any]
    max_tokens: int


@dataclass(frozen=True)
class ExtractionOutput:
    """The parsed answer, and where the time and tokens went."""

    data: dict[str, Any]
    text: str = ""  # the answer as the model wrote it, before parsing
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the KV cache
    completion_tokens: int = 0
    seconds: float = 0.0  # wall time inside the model call
    prompt_seconds: float = 0.0  # of `seconds`, evaluating the prompt's tokens not cached
    guessed_tokens: int = 0  # of completion_tokens, guessed from the prompt (prompt_lookup.py)
    # the answer ran into the prompt's max_tokens: `data` holds what was finished before
    # (json_prefix.py), the unfinished rest is dropped
    truncated: bool = False


class Extractor(ABC):
    identity: ExtractorIdentity
    # True when every call evaluates its prompt from scratch (config "reproducible"); recorded
    # on the memories it makes
    reproducible: bool = False

    @abstractmethod
    def extract(self, prompt: Prompt) -> ExtractionOutput:
        """Complete `prompt`; the answer is a dict that follows `prompt.schema`.
        Raises ExtractionError when the model fails or times out."""

    def choose(self, prompt: Prompt, prefix: str, options: Sequence[str]) -> dict[str, float]:
        """How likely each option is as the answer's next words after `prefix` (the answer's
        start, e.g. '{"changed":'), normalised over the options. The default asks `extract` and
        gives 1.0 to the option its answer continues with (0.0 to the others); a model that can
        read its next-token probabilities overrides it."""
        text = self.extract(prompt).text
        rest = text[len(prefix) :] if text.startswith(prefix) else ""
        chosen = next((o for o in options if rest.startswith(o)), None)
        if chosen is None:
            raise ExtractionError(f"the answer {text!r} continues {prefix!r} with no option")
        return {o: 1.0 if o == chosen else 0.0 for o in options}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model; the default holds none."""


# -- schema -> grammar ------------------------------------------------------------------------

# The converter's whitespace rule allows a newline and up to 20 indentation characters between
# tokens. Pretty-printed JSON costs generation time on two cores, so we allow one space at most.
_SPACE_RULE = re.compile(r"^space ::= .*$", re.MULTILINE)
# The converter's string character allows raw control characters, which JSON forbids: measured on
# the dev set, 1 add of 383 failed with "Invalid control character" when the model wrote a raw
# newline inside a fact. Control characters are refused (escapes such as \n stay allowed).
_CHAR_RULE = re.compile(r'^char ::= \[\^"\\\\\] ', re.MULTILINE)
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] '


def schema_to_gbnf(schema: Mapping[str, Any]) -> str:
    """Compile a JSON schema to a llama.cpp GBNF grammar, or raise ExtractionError."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        # Properties keep the schema's order: the model writes a fact's text before its links.
        gbnf = json_schema_to_gbnf(json.dumps(schema))
    except Exception as exc:  # the converter raises ValueError/AssertionError/KeyError
        raise ExtractionError(f"the answer schema does not compile to a grammar: {exc}") from exc
    if not gbnf.strip() or "root ::=" not in gbnf:
        raise ExtractionError("the answer schema compiled to an empty grammar")
    gbnf, count = _SPACE_RULE.subn('space ::= " "?', gbnf)
    if count != 1:
        raise ExtractionError("unexpected grammar shape: no single 'space' rule to tighten")
    if "char ::=" in gbnf:
        gbnf, count = _CHAR_RULE.subn(lambda _: _JSON_CHAR, gbnf)
        if count != 1:
            raise ExtractionError("unexpected grammar shape: no single 'char' rule to tighten")
    return gbnf


def parse_answer(text: str) -> dict[str, Any]:
    """The model's answer as a dict; the grammar guarantees JSON, this guards the guarantee."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ExtractionError(f"the model's answer is not JSON ({exc}): {text[:200]!r}") from exc
    if not isinstance(data, dict):
        raise ExtractionError(f"the model's answer is not a JSON object: {text[:200]!r}")
    return data


# -- llama.cpp ----------------------------------------------------------------------------


@dataclass
class _Loaded:
    llm: Any
    slots: KvSlots
    grammars: dict[str, Any] = field(default_factory=dict)  # schema json -> (gbnf, root rule)


class LlamaExtractor(Extractor):
    """The pinned GGUF extractor. Nothing is read from disk until the first `extract`. `nice`
    lowers the priority of the thread that runs the model (model_thread.py)."""

    def __init__(
        self,
        name: str,
        models_dir: Path | None = None,
        *,
        threads: int | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        seed: int = DEFAULT_SEED,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        reproducible: bool = False,
        nice: int = 0,
        lookup: bool = True,
    ) -> None:
        self.name = name
        self.reproducible = reproducible
        self.lookup = lookup  # guess tokens from the prompt (prompt_lookup.py)
        self.models_dir = models_dir
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.n_ctx = n_ctx
        self.seed = seed
        self.timeout_s = timeout_s
        self._loaded: _Loaded | None = None
        self._chat_format = ""
        self._identity: ExtractorIdentity | None = None
        self._lock = threading.Lock()
        self._thread = ModelThread("offline_mem-model", nice=nice)

    @property
    def identity(self) -> ExtractorIdentity:  # type: ignore[override]  # lazy, read-only
        if self._identity is None:
            from .model_files import model_identity

            ident = model_identity(self.name, self.models_dir)
            self._identity = ExtractorIdentity(name=ident.name, sha256=ident.sha256)
        return self._identity

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    def _load(self) -> _Loaded:
        if self._loaded is not None:
            return self._loaded
        from .manifest import load_manifest
        from .model_files import verified_model_dir

        manifest = load_manifest(self.models_dir)
        spec = manifest.get(self.name)
        if spec.role != "extractor" or not spec.chat_format:
            raise ModelError(f"model {self.name!r} is not an extractor with a pinned chat format")
        folder = verified_model_dir(self.name, self.models_dir, manifest=manifest)
        try:
            import llama_cpp  # noqa: F401
        except ImportError as exc:
            raise ModelError(
                "the extractor needs llama-cpp-python: pip install 'offline_mem[extract]'"
            ) from exc
        try:
            llm = load_llama(
                model_path=str(folder / spec.primary),
                chat_format=spec.chat_format,
                n_ctx=self.n_ctx,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                n_batch=REPRODUCIBLE_N_BATCH,
                seed=self.seed,
            )
        except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError on load
            raise ModelError(f"cannot load extractor {self.name!r} from {folder}: {exc}") from exc
        self._identity = ExtractorIdentity(name=spec.name, sha256=spec.primary_file.sha256)
        self._chat_format = spec.chat_format
        self._loaded = _Loaded(llm=llm, slots=KvSlots(llm))
        return self._loaded

    def _grammar(self, loaded: _Loaded, schema: Mapping[str, Any]) -> tuple[str, str]:
        """The schema's GBNF grammar and its root rule, parsed once against this model's vocabulary
        (llama.cpp reports a grammar it cannot parse only as a NULL sampler)."""
        key = json.dumps(schema, sort_keys=True)
        grammar = loaded.grammars.get(key)
        if grammar is None:
            grammar = (schema_to_gbnf(schema), "root")
            try:
                GrammarSampler(loaded.llm, *grammar).close()  # parse it once, fail here
            except ValueError as exc:
                raise ExtractionError(f"{exc} compiled from the schema") from exc
            loaded.grammars[key] = grammar
        return grammar

    def call_model(self, call: Callable[[Any, threading.Event], T]) -> T:
        """`call(llm, cancelled)` with the loaded `llama_cpp.Llama`, on the model thread (see
        model_thread.py), one call at a time; `cancelled` is set if the caller is interrupted."""

        def on_model_thread(cancelled: threading.Event) -> T:
            with self._lock, llama_logs_to_logging():
                return call(self._load().llm, cancelled)

        return self._thread.run(on_model_thread)

    def extract(self, prompt: Prompt) -> ExtractionOutput:
        return self.call_model(lambda llm, cancelled: self._extract(llm, prompt, cancelled))

    def _extract(self, llm: Any, prompt: Prompt, cancelled: threading.Event) -> ExtractionOutput:
        loaded = self._load()
        gbnf, root = self._grammar(loaded, prompt.schema)
        tokens = self._tokens(llm, prompt, "")
        if not self.reproducible:
            loaded.slots.switch_to(prompt.kind)  # each kind of prompt keeps its own KV cache
        start = time.perf_counter()
        try:
            decoded = decode_greedy(
                llm,
                tokens,
                gbnf=gbnf,
                root=root,
                max_tokens=prompt.max_tokens,
                deadline=time.monotonic() + self.timeout_s,
                reuse_cache=not self.reproducible,
                cancelled=cancelled,
                lookup=self.lookup,
            )
        except Exception as exc:  # context overflow, decode failure, ...
            raise ExtractionError(f"the extractor model failed: {exc}") from exc
        seconds = time.perf_counter() - start
        if decoded.finish == "deadline":
            raise ExtractionError(f"the extractor model took longer than {self.timeout_s}s")
        if decoded.finish == "cancelled":
            raise ExtractionError("the extraction was cancelled (its caller stopped waiting)")
        if decoded.finish == "length":
            salvaged = complete_prefix(decoded.text)
            if not isinstance(salvaged, dict):
                raise ExtractionError(
                    f"the model's answer did not end within {prompt.max_tokens} tokens"
                )
            log.warning(
                "the model's answer did not end within %d tokens: kept what it finished before",
                prompt.max_tokens,
            )
            data = salvaged
        else:
            data = parse_answer(decoded.text)
        return ExtractionOutput(
            data=data,
            text=decoded.text,
            prompt_tokens=len(tokens),
            cached_tokens=decoded.cached_tokens,
            completion_tokens=decoded.completion_tokens,
            seconds=seconds,
            prompt_seconds=decoded.prompt_seconds,
            guessed_tokens=decoded.guessed_tokens,
            truncated=decoded.finish == "length",
        )

    def _tokens(self, llm: Any, prompt: Prompt, answer_start: str) -> list[int]:
        """The chat prompt in the pinned format, then `answer_start`, as tokens."""
        formatter = _chat_formatter(self._chat_format)
        try:
            formatted = formatter(messages=[dict(m) for m in prompt.messages])
            return list(
                llm.tokenize(
                    (formatted.prompt + answer_start).encode("utf-8"),
                    add_bos=not formatted.added_special,
                    special=True,
                )
            )
        except Exception as exc:
            raise ExtractionError(f"cannot format the prompt: {exc}") from exc

    def choose(self, prompt: Prompt, prefix: str, options: Sequence[str]) -> dict[str, float]:
        """The options' next-token probabilities after the chat prompt and `prefix`, normalised
        over the options (one forward pass, no generation). Each option must start with a
        token of its own: that first token stands for it."""

        def first_token_logits(llm: Any, _cancelled: threading.Event) -> list[float]:
            tokens = self._tokens(llm, prompt, prefix)
            try:
                firsts = [llm.tokenize(o.encode("utf-8"), add_bos=False)[0] for o in options]
            except Exception as exc:
                raise ExtractionError(f"cannot tokenize {list(options)}: {exc}") from exc
            if len(set(firsts)) != len(firsts):
                raise ExtractionError(f"the options {list(options)} share their first token")
            if not self.reproducible:
                self._load().slots.switch_to(prompt.kind)
            try:
                logits = next_token_logits(llm, tokens, reuse_cache=not self.reproducible)
            except Exception as exc:
                raise ExtractionError(f"the extractor model failed: {exc}") from exc
            return [float(logits[t]) for t in firsts]

        chosen = np.array(self.call_model(first_token_logits))
        weights = np.exp(chosen - chosen.max())
        return {o: float(w) for o, w in zip(options, weights / weights.sum(), strict=True)}

    def close(self) -> None:
        def release(_cancelled: threading.Event) -> None:
            with self._lock, llama_logs_to_logging():
                if self._loaded is not None:
                    self._loaded.llm.close()
                    self._loaded = None

        if self._loaded is not None:
            self._thread.run(release)
        self._thread.close()


def _chat_formatter(name: str) -> Any:
    """The prompt formatter of a pinned chat format. The prompt is formatted and tokenized here,
    not inside `create_chat_completion`, so we know exactly which tokens the KV cache holds and can
    stop a call at a deadline."""
    from llama_cpp import llama_chat_format

    formatters = {"chatml": llama_chat_format.format_chatml}
    if name not in formatters:
        raise ModelError(f"chat format {name!r} is not supported; supported: {sorted(formatters)}")
    return formatters[name]
