"""Greedy decoding under a grammar (offline_mem.pinned.decoding) on the pinned 0.5B GGUF (runs in
CI, never skipped): it must write exactly what llama-cpp-python's own sampler chain writes at
temperature 0 with the same grammar, including where the grammar rejects the model's first
choice, and stop with the right reason. With prompt lookup (guessed tokens checked in one pass)
every token written must still be the model's own greedy choice."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from offline_mem.config import resolve_models_dir
from offline_mem.pinned.decoding import GrammarSampler, decode_greedy
from offline_mem.pinned.extractor import schema_to_gbnf
from offline_mem.pinned.manifest import load_manifest
from offline_mem.pinned.model_files import verified_model_dir

pytestmark = pytest.mark.real_model

SMALL = "qwen2.5-coder-0.5b-instruct"
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "pets": {"type": "array", "items": {"type": "string"}},
        "age": {"type": "integer"},
    },
    "required": ["city", "pets", "age"],
    "additionalProperties": False,
}
QUESTION = (
    "<|im_start|>system\nAnswer in JSON.<|im_end|>\n<|im_start|>user\nI am Ana, 34, I live in "
    "Porto with my dogs Rex and Lua. Where do I live, which pets, how old?<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def llm():
    from llama_cpp import Llama

    manifest = load_manifest(resolve_models_dir())
    spec = manifest.get(SMALL)
    folder = verified_model_dir(SMALL, resolve_models_dir(), manifest=manifest)
    model = Llama(str(folder / spec.primary), n_ctx=1024, n_threads=2, seed=1, verbose=False)
    yield model
    model.close()


def tokens_of(llm, text: str) -> list[int]:
    return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)


def reference(llm, prompt: list[int], gbnf: str, max_tokens: int) -> dict:
    from llama_cpp.llama_grammar import LlamaGrammar

    llm.reset()
    reply = llm.create_completion(
        prompt=prompt, grammar=LlamaGrammar.from_string(gbnf, verbose=False), temperature=0.0,
        top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, max_tokens=max_tokens,
    )  # fmt: skip
    llm.reset()
    return reply["choices"][0]


def decode(llm, prompt: list[int], gbnf: str, **options):
    # the deadline only guards against a hang: these tests compare what is written, and on a
    # 2-core machine shared with another model job 120 tokens took more than 60 s (CI, session 15)
    deadline = time.monotonic() + 600
    return decode_greedy(
        llm, prompt, gbnf=gbnf, root="root", max_tokens=120, deadline=deadline, **options
    )


def test_writes_what_the_library_sampler_writes_from_an_empty_cache(llm):
    prompt = tokens_of(llm, QUESTION)
    free = reference(llm, prompt, "root ::= [^\\x00]*", max_tokens=3)["text"]
    assert free and not free.startswith("{")  # so the grammar overrules the model's first choice
    gbnf = schema_to_gbnf(SCHEMA)
    expected = reference(llm, prompt, gbnf, max_tokens=120)
    assert expected["finish_reason"] == "stop"
    first = decode(llm, prompt, gbnf, lookup=False)  # one pass per token, as the reference
    assert first.text == expected["text"] and first.finish == "stop"
    assert '"Porto"' in first.text and first.cached_tokens == 0


def test_the_same_cache_history_gives_the_same_answers(llm):
    """What the default mode promises: the same prompts after the same cache history give the
    same answers on the same build. A prompt served from the cache need not give the answer of
    the same prompt evaluated in one pass (on some CPUs the logits differ in the last bits and a
    near-tie flips, e.g. '{"city":"Porto"' against '{"city": "Porto"'), so that is not asserted;
    reproducible mode (next test) is what removes the dependence."""
    prompt = tokens_of(llm, QUESTION)
    gbnf = schema_to_gbnf(SCHEMA)
    runs = []
    for _ in range(2):
        llm.reset()
        fresh, cached = decode(llm, prompt, gbnf), decode(llm, prompt, gbnf)
        runs.append((fresh.text, cached.text))
        assert fresh.cached_tokens == 0 and cached.cached_tokens == len(prompt)
        assert json.loads(cached.text)["city"] == "Porto"  # still an answer to the question
    assert runs[0] == runs[1]


def test_without_cache_reuse_the_answer_depends_on_the_prompt_alone(llm):
    prompt = tokens_of(llm, QUESTION)
    gbnf = schema_to_gbnf(SCHEMA)
    llm.reset()
    alone = decode(llm, prompt, gbnf, reuse_cache=False)
    other = tokens_of(llm, QUESTION.replace("Porto", "Braga").replace("34", "51"))
    decode(llm, other, gbnf)  # a different cache state, sharing a long prefix with the prompt
    after_other = decode(llm, prompt, gbnf, reuse_cache=False)
    after_itself = decode(llm, prompt, gbnf, reuse_cache=False)
    assert alone.cached_tokens == after_other.cached_tokens == after_itself.cached_tokens == 0
    assert alone.text == after_other.text == after_itself.text
    assert '"Porto"' in alone.text


def test_stops_at_the_token_limit_and_at_the_deadline(llm):
    prompt = tokens_of(llm, QUESTION)
    gbnf = schema_to_gbnf(SCHEMA)
    cut = decode_greedy(llm, prompt, gbnf=gbnf, root="root", max_tokens=4, deadline=1e18)
    assert cut.finish == "length" and cut.completion_tokens == 4
    assert cut.text.startswith("{")
    late = decode_greedy(
        llm, prompt, gbnf=gbnf, root="root", max_tokens=50, deadline=time.monotonic() - 1
    )
    assert late.finish == "deadline" and late.completion_tokens == 0


def test_the_sampler_picks_the_best_token_the_grammar_allows(llm):
    yes, no = (tokens_of(llm, word)[0] for word in ("yes", "no"))
    sampler = GrammarSampler(llm, 'root ::= "yes" | "no"', "root")
    try:
        logits = np.full(llm.n_vocab(), -5.0, dtype=np.single)
        logits[tokens_of(llm, "maybe")[0]] = 9.0  # the argmax, which the grammar rejects
        logits[no], logits[yes] = 3.0, 2.0
        assert not sampler.allows(tokens_of(llm, "maybe")[0], 9.0)
        assert sampler.pick(logits) == no
        logits[yes] = 10.0
        assert sampler.pick(logits) == yes  # allowed argmax: taken without filtering
    finally:
        sampler.close()


def test_strings_cannot_hold_raw_control_characters(llm):
    """JSON forbids a raw newline inside a string; the converter's grammar allowed one, and a dev
    set add failed on it ("Invalid control character"). The tightened grammar refuses it and
    still takes the escaped form."""
    gbnf = schema_to_gbnf({"type": "object", "properties": {"a": {"type": "string"}},
                           "required": ["a"], "additionalProperties": False})  # fmt: skip
    assert "\\x00-\\x1F" in next(line for line in gbnf.splitlines() if line.startswith("char"))
    sampler = GrammarSampler(llm, gbnf, "root")
    try:
        for token in tokens_of(llm, '{"a": "x'):
            assert sampler.allows(token, 1.0)
            sampler.accept(token)
        newline = tokens_of(llm, "\n")[0]
        escaped = tokens_of(llm, "\\n")[0]
        assert not sampler.allows(newline, 1.0)
        assert sampler.allows(escaped, 1.0)
    finally:
        sampler.close()


COPY_SCHEMA = {
    "type": "object",
    "properties": {"quote": {"type": "string"}},
    "required": ["quote"],
    "additionalProperties": False,
}
SENTENCE = (
    "Tomasz keeps seven beehives behind the old mill near Lublin, and sells the honey in May."
)
COPY = (
    "<|im_start|>system\nAnswer in JSON.<|im_end|>\n<|im_start|>user\nRepeat this sentence "
    f"exactly, as the quote: {SENTENCE}<|im_end|>\n<|im_start|>assistant\n"
)


def greedy_margins(llm, prompt: list[int], written: list[int], gbnf: str) -> list[float]:
    """For each written token, how far its logit lies below the best token the grammar allowed
    there, the logits computed one token per pass (0.0 where it is that best token)."""
    import llama_cpp

    llm.reset()
    llm.eval(prompt)
    sampler = GrammarSampler(llm, gbnf, "root")
    margins = []
    try:
        for token in written:
            row = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
            logits = np.ctypeslib.as_array(row, shape=(llm.n_vocab(),)).copy()
            best = sampler.pick(logits)
            margins.append(float(logits[best] - logits[token]))
            sampler.accept(token)
            llm.eval([token])
    finally:
        sampler.close()
    return margins


def test_lookup_writes_the_greedy_answer_with_fewer_passes(llm):
    prompt = tokens_of(llm, COPY)
    gbnf = schema_to_gbnf(COPY_SCHEMA)
    llm.reset()
    guessed = decode(llm, prompt, gbnf, reuse_cache=False)
    assert guessed.finish == "stop" and SENTENCE in json.loads(guessed.text)["quote"]
    # most of the copied sentence came from guesses, checked several per pass
    assert guessed.guessed_tokens >= guessed.completion_tokens // 2
    # every token is the one a pass of its own picks, up to the last bits of a near-tie
    assert max(greedy_margins(llm, prompt, list(guessed.tokens), gbnf)) < 1e-2
    llm.reset()
    plain = decode(llm, prompt, gbnf, reuse_cache=False, lookup=False)
    assert plain.guessed_tokens == 0 and SENTENCE in json.loads(plain.text)["quote"]


def test_a_wrong_guess_is_replaced_by_the_models_token(llm, monkeypatch):
    """A prompt in which the sentence's opening occurs before with another ending: the guess
    taken from that occurrence is wrong, and the answer still ends as the model writes it."""
    from offline_mem.pinned import decoding

    batches: list[int] = []
    evaluate_all = decoding._evaluate_all

    def counting(model, tokens):
        batches.append(len(tokens))
        evaluate_all(model, tokens)

    monkeypatch.setattr(decoding, "_evaluate_all", counting)
    decoy = SENTENCE.replace("sells the honey in May", "gives the wax to his aunt")
    prompt = tokens_of(llm, COPY.replace("Repeat this sentence", f"Not this: {decoy} Repeat this"))
    gbnf = schema_to_gbnf(COPY_SCHEMA)
    llm.reset()
    answer = decode(llm, prompt, gbnf, reuse_cache=False)
    assert sum(size - 1 for size in batches) > answer.guessed_tokens  # some guess was rejected
    assert "sells the honey in May" in answer.text
    assert llm.detokenize(list(answer.tokens)).decode() == answer.text
    assert max(greedy_margins(llm, prompt, list(answer.tokens), gbnf)) < 1e-2
    assert answer.guessed_tokens > 0
