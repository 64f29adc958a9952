"""The numpy forward (bert_numpy.py) against sentence-transformers itself, on the pinned weights.

Stored vectors and query vectors must not drift apart: every text here gives the vector
SentenceTransformer.encode gives, within 1e-5 per component, with the same tokens (truncation at
max_seq_length 256, [CLS]/[SEP], lower-casing as tokenizer.json defines). Any layout the forward
does not reproduce is refused, and the embedder then runs sentence-transformers itself.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from offline_mem.pinned import blas_threads as blas_threads_module
from offline_mem.pinned import process_tuning
from offline_mem.pinned.bert_layout import UnsupportedLayout, read_layout
from offline_mem.pinned.bert_numpy import NumpyBertEncoder, _gelu, load_encoder
from offline_mem.pinned.blas_threads import MAX_THREADS, blas_threads_for_forward, idle_cores
from offline_mem.pinned.embedder import SentenceTransformerEmbedder
from offline_mem.pinned.model_files import model_identity, verified_model_dir
from offline_mem.values import EmbedderIdentity

ROOT = Path(__file__).resolve().parent.parent

NAME = "all-MiniLM-L6-v2"
TOLERANCE = 1e-5

TEXTS = [
    "What is the name of Oskar's sister?",
    "I ride a Brompton folding bike to work",
    "",
    " ",
    "\n\t ",
    "x",
    "?!",
    "  leading and trailing spaces  ",
    "UPPER case And MiXeD Case",
    "Ünïcödé, café naïve résumé, emoji 🐈🚲 and numbers 4417-B",
    "中文字符和日本語のテキスト, Кириллица, العربية",
    "a\u0301 combining accent, zero\u200bwidth space, non\u00a0breaking",
    "a long text about bikes and sisters " * 60,  # ~360 words: truncated at 256 tokens
    "word " * 254,  # 254 words + [CLS] + [SEP] = 256 tokens: just fits
    "word " * 255,  # one more: truncated
]


@pytest.fixture(scope="module")
def folder() -> Path:
    return verified_model_dir(NAME)


@pytest.fixture(scope="module")
def reference(folder: Path) -> object:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)


@pytest.fixture(scope="module")
def encoder(folder: Path) -> NumpyBertEncoder:
    return load_encoder(folder)


pytestmark = pytest.mark.real_model


def _encode(model: object, texts: list[str]) -> np.ndarray:
    return model.encode(texts, convert_to_numpy=True, normalize_embeddings=True)  # type: ignore[attr-defined]


def test_the_pinned_layout_is_the_one_reproduced(folder: Path) -> None:
    layout = read_layout(folder)
    assert (layout.hidden, layout.heads, layout.layers) == (384, 12, 6)
    assert layout.max_seq_length == 256  # sentence_bert_config.json, not tokenizer.json's 128


def test_tokens_are_sentence_transformers_tokens(
    encoder: NumpyBertEncoder, reference: object
) -> None:
    features = reference.preprocess(TEXTS)  # type: ignore[attr-defined]
    for row, text in enumerate(TEXTS):
        expected = [
            int(token)
            for token, keep in zip(
                features["input_ids"][row], features["attention_mask"][row], strict=True
            )
            if keep
        ]
        ids = encoder.tokenizer.encode(text).ids
        assert ids == expected, text
        assert ids[0] == 101 and ids[-1] == 102 and len(ids) <= 256
    assert len(encoder.tokenizer.encode(TEXTS[-1]).ids) == 256
    assert encoder.tokenizer.encode("HeLLo").ids == encoder.tokenizer.encode("hello").ids


def test_vectors_equal_sentence_transformers(encoder: NumpyBertEncoder, reference: object) -> None:
    expected = _encode(reference, TEXTS)
    batch = encoder.encode(TEXTS)
    assert batch.dtype == np.float32 and batch.shape == (len(TEXTS), 384)
    for row, text in enumerate(TEXTS):
        assert np.abs(batch[row] - expected[row]).max() < TOLERANCE, text
        single = encoder.encode([text])[0]  # a query: alone, not packed with others
        assert np.abs(single - expected[row]).max() < TOLERANCE, text
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-6)


def test_batches_larger_than_one_forward(folder: Path, reference: object) -> None:
    texts = [f"memory {i}: {'my sister Marta ' * (i % 7)}lives in Porto" for i in range(70)]
    small_batches = load_encoder(folder, batch_size=16)
    assert np.abs(small_batches.encode(texts) - _encode(reference, texts)).max() < TOLERANCE
    assert small_batches.encode([]).shape == (0, 384)


def test_the_embedder_runs_the_numpy_forward_for_the_pinned_model(
    folder: Path, reference: object
) -> None:
    ident = model_identity(NAME)
    embedder = SentenceTransformerEmbedder(
        folder, EmbedderIdentity(NAME, ident.sha256, int(ident.dimension or 0))
    )
    assert embedder.backend == "numpy"
    vector = embedder.embed(TEXTS[0])
    assert np.abs(vector - _encode(reference, TEXTS[:1])[0]).max() < TOLERANCE


def test_gelu_is_as_close_to_the_exact_one_as_torchs() -> None:
    """numpy has no erf; the approximation (1.5e-7) in float32 keeps GELU within 1e-6 of
    x * Phi(x) computed in double precision, as torch's own float32 GELU is (measured: 4.6e-7
    here, 1.0e-6 for torch)."""
    grid = np.linspace(-10, 10, 40001, dtype=np.float32)
    exact = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) for x in grid.tolist()])
    assert np.abs(_gelu(grid).astype(np.float64) - exact).max() < 1e-6


# -- layouts the forward does not reproduce ------------------------------------------------------


def _copy_layout(folder: Path, dest: Path) -> Path:
    """The folder's small files copied, the weights linked (they are not changed)."""
    for path in folder.rglob("*"):
        if path.is_file():
            target = dest / path.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.name == "model.safetensors":
                target.symlink_to(path)
            else:
                shutil.copyfile(path, target)
    return dest


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("file", "changes", "reason"),
    [
        ("1_Pooling/config.json", {"pooling_mode_mean_tokens": False,
                                   "pooling_mode_cls_token": True}, "pooling"),
        ("config.json", {"hidden_act": "gelu_new"}, "gelu"),
        ("config.json", {"position_embedding_type": "relative_key"}, "position"),
        ("config.json", {"model_type": "roberta"}, "bert"),
        ("sentence_bert_config.json", {"do_lower_case": True}, "lower-cases"),
        ("config_sentence_transformers.json", {"prompts": {"query": "query: "},
                                               "default_prompt_name": "query"}, "prompts"),
        ("tokenizer_config.json", {"do_lower_case": False}, "lowercase"),
        ("config.json", {"hidden_size": None}, "hidden_size"),
    ],
)  # fmt: skip
def test_other_layouts_are_refused(
    folder: Path, tmp_path: Path, file: str, changes: dict[str, object], reason: str
) -> None:
    copy = _copy_layout(folder, tmp_path / "model")
    load_encoder(copy)  # the untouched copy is accepted
    _edit(copy / file, **changes)
    with pytest.raises(UnsupportedLayout, match=reason):
        load_encoder(copy)


def test_a_layout_without_normalize_is_refused(folder: Path, tmp_path: Path) -> None:
    copy = _copy_layout(folder, tmp_path / "model")
    modules = json.loads((copy / "modules.json").read_text())
    (copy / "modules.json").write_text(json.dumps(modules[:2]))
    with pytest.raises(UnsupportedLayout, match=r"modules\.json"):
        read_layout(copy)


def test_the_embedder_falls_back_to_sentence_transformers(folder: Path, tmp_path: Path) -> None:
    """CLS pooling: the numpy forward refuses it; the embedder gives sentence-transformers'
    vectors for it, computed by sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    copy = _copy_layout(folder, tmp_path / "model")
    _edit(
        copy / "1_Pooling/config.json",
        pooling_mode_mean_tokens=False,
        pooling_mode_cls_token=True,
    )
    embedder = SentenceTransformerEmbedder(copy, EmbedderIdentity("cls", "0" * 64, 384))
    assert embedder.backend == "sentence-transformers"
    expected = _encode(
        SentenceTransformer(str(copy), device="cpu", local_files_only=True), TEXTS[:3]
    )
    assert np.abs(embedder.embed_batch(TEXTS[:3]) - expected).max() < 1e-6


# -- BLAS threads: one per idle core ----------------------------------------------------------


@pytest.fixture
def blas_threads() -> Iterator[object]:
    """The thread counts of the BLAS numpy runs on (the libraries loaded when the embedder first
    ran; scipy's own OpenBLAS, loaded later by sentence-transformers, is not numpy's)."""
    from threadpoolctl import ThreadpoolController

    from offline_mem.pinned.blas_threads import _blas_controller

    numpy_blas = {lib["filepath"] for lib in _blas_controller().select(user_api="blas").info()}
    assert numpy_blas
    controller = ThreadpoolController()
    yield lambda: [
        lib["num_threads"]
        for lib in controller.select(user_api="blas").info()
        if lib["filepath"] in numpy_blas
    ]


@pytest.fixture
def runnable_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Set the machine's runnable task count that the thread choice reads (a fake /proc/loadavg),
    in a process offline_mem owns (the limit is set only there)."""
    fake = tmp_path / "loadavg"
    monkeypatch.setattr(blas_threads_module, "LOADAVG", fake)
    monkeypatch.setattr(process_tuning, "_owned", True)

    def set_runnable(count: int | None) -> None:
        if count is None:
            fake.unlink(missing_ok=True)
        else:
            fake.write_text(f"0.52 0.40 0.31 {count}/312 4242\n")

    yield set_runnable


def test_a_forward_gets_one_thread_per_idle_core(runnable_tasks, blas_threads) -> None:  # type: ignore[no-untyped-def]
    cores = len(os.sched_getaffinity(0))
    runnable_tasks(1)  # only the caller runs
    assert idle_cores() == cores
    with blas_threads_for_forward() as threads:
        assert threads == min(cores, MAX_THREADS)
        assert set(blas_threads()) == {threads}
    runnable_tasks(cores + 1)  # every core has another task
    assert idle_cores() == 1
    with blas_threads_for_forward() as threads:
        assert threads == 1
        assert set(blas_threads()) == {1}
    runnable_tasks(None)  # unreadable (not Linux): one thread, as when busy
    assert idle_cores() == 1
    runnable_tasks(40)
    assert idle_cores() == 1


# Run in a fresh interpreter: the test process may hold niced threads of earlier tests (a
# llama.cpp pool spinning at the extractor's nice), which idle_cores rightly counts as yielding.
SPINNER = """
import os, sys, threading
from pathlib import Path
from offline_mem.pinned import blas_threads
blas_threads.LOADAVG = Path(sys.argv[1])
blas_threads.LOADAVG.write_text("0.52 0.40 0.31 2/312 4242\\n")  # the caller and the spinner
nice = int(sys.argv[2])
stop, started = threading.Event(), threading.Barrier(2)

def spin():
    if nice:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    started.wait()
    while not stop.is_set():
        pass

spinner = threading.Thread(target=spin)
spinner.start()
started.wait()
print(max(blas_threads.idle_cores() for _ in range(20)))  # the spinner is runnable nearly always
stop.set()
spinner.join()
"""


def test_our_own_niced_threads_leave_their_cores_to_a_forward(tmp_path: Path) -> None:
    """A thread of this process at a higher nice value (the extractor's, where offline_mem
    serves) gives way to the forward; one at the caller's own priority does not."""
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.fail("this check needs two cores")  # every CI machine of this project has two
    for nice, expected in ((10, min(cores, MAX_THREADS)), (0, cores - 1)):
        done = subprocess.run(
            [sys.executable, "-c", SPINNER, str(tmp_path / "loadavg"), str(nice)],
            capture_output=True, text=True, timeout=60, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert int(done.stdout) == expected, nice


def test_blas_workers_still_spinning_after_a_forward_are_not_other_tasks(  # type: ignore[no-untyped-def]
    runnable_tasks, monkeypatch
) -> None:
    """OpenBLAS's workers spin (runnable) for ~0.1 s after a product: right after a forward on two
    threads, one extra runnable task is that worker, not another program; later it is not."""
    cores = len(os.sched_getaffinity(0))
    runnable_tasks(1)
    with blas_threads_for_forward() as first:
        pass
    runnable_tasks(2)  # the caller and one more task
    with blas_threads_for_forward() as second:
        pass
    assert second == first == min(cores, MAX_THREADS)
    monkeypatch.setattr(blas_threads_module, "_last_forward_end", float("-inf"))  # long ago
    with blas_threads_for_forward() as later:
        pass
    assert later == max(1, min(cores - 1, MAX_THREADS))


def test_the_limit_holds_inside_whichever_thread_calls(runnable_tasks, blas_threads) -> None:  # type: ignore[no-untyped-def]
    """The limit holds inside every call, from any thread, and the setting is back after each;
    calls from several threads take turns."""
    runnable_tasks(99)  # busy: one thread, whatever the BLAS default is
    before = blas_threads()
    seen: list[list[int]] = []
    inside = threading.Semaphore(0)
    overlap: list[bool] = []

    def call() -> None:
        with blas_threads_for_forward():
            overlap.append(inside.acquire(blocking=False))  # someone else inside?
            inside.release()
            seen.append(blas_threads())
            time.sleep(0.05)
            inside.acquire()

    call()  # this thread first (it held threadpoolctl's control), then others
    assert blas_threads() == before
    workers = [threading.Thread(target=call) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert seen == [[1] * len(before)] * 4
    assert overlap == [False] * 4
    assert blas_threads() == before


def test_a_library_process_keeps_its_blas_threads(
    encoder: NumpyBertEncoder, blas_threads: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where offline_mem does not own the process, a forward leaves the BLAS thread count alone:
    another thread reading it while forwards run sees the count it had before."""
    monkeypatch.setattr(process_tuning, "_owned", False)
    before = blas_threads()  # type: ignore[operator]
    seen: list[list[int]] = []
    running = threading.Event()
    done = threading.Event()

    def watch() -> None:
        running.wait()
        while not done.is_set():
            seen.append(blas_threads())  # type: ignore[operator]

    watcher = threading.Thread(target=watch)
    watcher.start()
    with blas_threads_for_forward() as threads:
        assert threads is None
    try:
        running.set()
        for _ in range(20):
            encoder.encode(TEXTS[:8])
    finally:
        done.set()
        watcher.join()
    assert seen and all(counts == before for counts in seen)
    assert blas_threads() == before  # type: ignore[operator]
