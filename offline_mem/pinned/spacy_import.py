"""Import spaCy without torch, without its command line, without the garbage collector's passes.

Three costs of a plain `import spacy` here, none of which text analysis needs:
- thinc, spaCy's model library, imports torch at its own import when torch is installed (to offer
  PyTorch layers), and torch is installed here for sentence-transformers. The pinned
  en_core_web_sm runs on thinc's numpy layers and never calls torch.
- spaCy's package imports its command line (spacy.cli: typer, weasel, requests, httpx, jinja2)
  to re-export one function, `spacy.info`.
- the cyclic garbage collector runs again and again over the objects the import creates and
  frees none of them.
Measured on this 2-core machine while other processes kept both cores busy (load 7-8; medians of
3 fresh processes, same run): plain 7.2 s; without torch 2.0 s; also without the command line
1.9 s; also without the collector's passes (this module) 1.4 s. With less load: 2.3 s plain,
0.6-0.75 s this way.

Each of the three changes the process for a moment or for good (other threads' garbage is not
collected meanwhile; `spacy.cli` is a stand-in meanwhile; thinc has no PyTorch support for the rest
of the process), so they are made only where offline_mem owns the process (process_tuning.py):
then, when offline_mem is the first to import spaCy, the import runs with the garbage collector
paused, with `spacy.cli.info` standing in as a module whose `info` imports the real one when
called (the real spacy.cli imports as usual afterwards), and — when neither thinc nor torch is
imported yet — with thinc's own `import torch` (from the thinc.compat module only, in this thread
only) failing as if torch were not installed. Anywhere else spaCy is imported plainly.
tests/test_spacy_import.py checks that the pipeline's output is the same either way.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from .process_tuning import process_claimed

_TORCH = "torch"
_TORCH_IMPORTER = "thinc.compat"  # the only module whose `import torch` is refused
_CLI = ("spacy.cli", "spacy.cli.info")


def import_spacy() -> ModuleType:
    """The `spacy` module, imported as the module docstring says if it is not imported yet."""
    if "spacy" in sys.modules:
        return sys.modules["spacy"]
    if not process_claimed():
        import spacy

        return spacy
    hide_torch = "thinc" not in sys.modules and _TORCH not in sys.modules
    try:
        with _gc_paused(), _cli_stubbed(), _torch_hidden_from_thinc(hide_torch):
            import spacy
    except ImportError:
        # a spaCy that needs more of its command line, or torch, at import: the plain import
        # (and if spaCy is missing, its ImportError)
        import spacy
    return spacy


@contextmanager
def _gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _real_info(*args: Any, **kwargs: Any) -> Any:
    """`spacy.info`, imported when it is called (spaCy's own command line)."""
    from spacy.cli.info import info

    return info(*args, **kwargs)


@contextmanager
def _cli_stubbed() -> Iterator[None]:
    package = ModuleType(_CLI[0], "stand-in while offline_mem imports spacy")
    package.__path__ = []
    module = ModuleType(_CLI[1], "stand-in while offline_mem imports spacy")
    module.info = _real_info  # type: ignore[attr-defined]
    stubs = dict(zip(_CLI, (package, module), strict=True))
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for name, stub in stubs.items():
            if sys.modules.get(name) is stub:
                del sys.modules[name]


class _HideTorchFromThinc:
    """A meta path finder that refuses `torch` to thinc.compat, in the importing thread."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] == _TORCH and self._asked_by_thinc():
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None  # any other import goes on as usual

    def _asked_by_thinc(self) -> bool:
        if threading.get_ident() != self.thread:
            return False
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_globals.get("__name__") == _TORCH_IMPORTER:
                return True
            frame = frame.f_back  # type: ignore[assignment]
        return False


@contextmanager
def _torch_hidden_from_thinc(hide: bool) -> Iterator[None]:
    if not hide:
        yield
        return
    finder = _HideTorchFromThinc()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
