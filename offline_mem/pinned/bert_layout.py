"""Which sentence-transformers folders the numpy forward (bert_numpy.py) reproduces.

`read_layout` reads a model folder's own files — modules.json, the pooling config,
sentence_bert_config.json, config_sentence_transformers.json, config.json and the tokenizer's
config — and accepts exactly one shape: Transformer(BertModel: absolute positions, exact GELU,
no pruned heads) -> mean Pooling -> Normalize, no prompts, a WordPiece tokenizer.json whose
normaliser agrees with tokenizer_config.json (`check_tokenizer`, on the loaded tokenizer: parsing
its 700 kB in Python would cost 0.1-0.2 s). Anything else raises `UnsupportedLayout`, and the
embedder then loads sentence-transformers itself. No model library is imported here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODULE_TYPES = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)
# sentence_bert_config.json keys that do not change what the forward computes
_PLAIN_ST_KEYS = frozenset({"max_seq_length", "do_lower_case"})
_PLAIN_PROMPT_KEYS = frozenset(
    {"__version__", "prompts", "default_prompt_name", "similarity_fn_name"}
)


class UnsupportedLayout(Exception):
    """The folder is not the layout the numpy forward reproduces (the message says why)."""


@dataclass(frozen=True)
class BertLayout:
    folder: Path
    hidden: int
    heads: int
    layers: int
    intermediate: int
    vocab_size: int
    max_positions: int
    layer_norm_eps: float
    max_seq_length: int  # tokens, [CLS] and [SEP] included: longer texts are truncated
    normalizer: dict[str, Any]  # what tokenizer_config.json says the BertNormalizer does


def read_layout(folder: Path) -> BertLayout:
    """The layout of a sentence-transformers folder, or UnsupportedLayout."""
    folder = Path(folder)
    pooling_dir = _check_modules(folder)
    config = _json(folder / "config.json")
    _require(config.get("model_type") == "bert", "config.json: model_type is not bert")
    _require(
        config.get("architectures", ["BertModel"]) == ["BertModel"],
        "config.json: architectures is not [BertModel]",
    )
    _require(config.get("hidden_act") == "gelu", "config.json: hidden_act is not exact gelu")
    _require(
        config.get("position_embedding_type", "absolute") == "absolute",
        "config.json: position embeddings are not absolute",
    )
    _require(not config.get("is_decoder", False), "config.json: is_decoder")
    _require(not config.get("pruned_heads"), "config.json: pruned heads")
    hidden, heads = _int(config, "hidden_size"), _int(config, "num_attention_heads")
    _require(hidden % heads == 0, "config.json: hidden_size is not a multiple of the heads")
    _check_pooling(folder / pooling_dir / "config.json", hidden)
    _check_prompts(folder / "config_sentence_transformers.json")
    st_config = _json(folder / "sentence_bert_config.json")
    _require(set(st_config) <= _PLAIN_ST_KEYS, f"sentence_bert_config.json: {sorted(st_config)}")
    _require(not st_config.get("do_lower_case", False), "sentence_bert_config.json: lower-cases")
    max_positions = _int(config, "max_position_embeddings")
    max_seq_length = int(st_config.get("max_seq_length") or max_positions)
    normalizer = _normalizer_settings(folder)
    return BertLayout(
        folder=folder,
        hidden=hidden,
        heads=heads,
        layers=_int(config, "num_hidden_layers"),
        intermediate=_int(config, "intermediate_size"),
        vocab_size=_int(config, "vocab_size"),
        max_positions=max_positions,
        layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
        # sentence-transformers truncates at max_seq_length, never past the position table
        max_seq_length=min(max_seq_length, max_positions),
        normalizer=normalizer,
    )


def _check_modules(folder: Path) -> str:
    """modules.json is exactly Transformer (the folder itself) -> Pooling -> Normalize; returns
    the pooling module's folder."""
    modules = sorted(_json(folder / "modules.json"), key=lambda m: int(m["idx"]))
    types = tuple(m.get("type") for m in modules)
    _require(types == MODULE_TYPES, f"modules.json: {list(types)}")
    _require(modules[0].get("path", "") == "", "modules.json: the transformer is in a subfolder")
    return str(modules[1]["path"])


def _check_pooling(path: Path, hidden: int) -> None:
    pooling = _json(path)
    modes = {k: v for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
    _require(modes == {"pooling_mode_mean_tokens": True}, f"{path.name}: pooling {sorted(modes)}")
    _require(pooling.get("include_prompt", True) is True, f"{path.name}: include_prompt")
    _require(
        int(pooling.get("word_embedding_dimension", hidden)) == hidden,
        f"{path.name}: word_embedding_dimension differs from hidden_size",
    )


def _check_prompts(path: Path) -> None:
    """A default prompt would be prepended to every text by `encode`."""
    if not path.is_file():
        return
    config = _json(path)
    _require(set(config) <= _PLAIN_PROMPT_KEYS, f"{path.name}: {sorted(config)}")
    _require(not config.get("prompts") and not config.get("default_prompt_name"), "prompts")


def _normalizer_settings(folder: Path) -> dict[str, Any]:
    """What tokenizer_config.json says the normaliser does: transformers builds its tokenizer
    from tokenizer.json, which must agree (check_tokenizer)."""
    _require((folder / "tokenizer.json").is_file(), "no tokenizer.json")
    settings = _json(folder / "tokenizer_config.json")
    _require(
        settings.get("tokenizer_class") in ("BertTokenizer", "BertTokenizerFast"),
        "tokenizer_config.json: not a BERT tokenizer",
    )
    return {field: settings.get(setting, default) for setting, field, default in _NORMALIZER_FIELDS}


_NORMALIZER_FIELDS = (
    ("do_lower_case", "lowercase", True),
    ("strip_accents", "strip_accents", None),
    ("tokenize_chinese_chars", "handle_chinese_chars", True),
)


def check_tokenizer(tokenizer: Any, layout: BertLayout) -> None:
    """The loaded tokenizer.json is a WordPiece with a BertNormalizer doing what
    tokenizer_config.json says (case, accents, Chinese characters)."""
    _require(type(tokenizer.model).__name__ == "WordPiece", "tokenizer.json: not WordPiece")
    normalizer = json.loads(tokenizer.normalizer.__getstate__()) if tokenizer.normalizer else {}
    _require(normalizer.get("type") == "BertNormalizer", "tokenizer.json: not a BertNormalizer")
    for field, expected in layout.normalizer.items():
        _require(
            normalizer.get(field) == expected,
            f"tokenizer_config.json and tokenizer.json disagree on {field}",
        )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UnsupportedLayout(f"cannot read {path.name}: {exc}") from exc


def _int(config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    _require(isinstance(value, int) and value > 0, f"config.json: no positive {key}")
    return int(value)  # type: ignore[arg-type]


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise UnsupportedLayout(reason)
