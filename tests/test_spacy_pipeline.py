"""The shared spaCy pipeline (spacy_pipeline.py) analyses text exactly as a plain spacy.load:
loaded over a blank tokenizer, and grown the recogniser when the first write comes after searches.

Runs in a fresh interpreter: the pipelines are shared per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from offline_mem.pinned.model_files import verified_model_dir

pytestmark = pytest.mark.real_model

TEXTS = [
    "My sister Marta moved to Porto in 2021 and works at Hospital São João.",
    'We watched "The Matrix" with Dr. Okonkwo at 9pm in New York.',
    "I rode 42 km on my Brompton yesterday; the ride was better than expected!",
    "Tiago's neighbour Bruno plays the cello for the Lisbon orchestra.",
    "Dr. Okonkwo's U.K. e-mail isn't https://x.org/a?b=1 -- :) 4417-B, it's 9pm!",
    "Let's go to N.Y.C. at 5:30pm w/ Ana's dog (she's 3yrs old) & don't forget the £20",
    "I'm gonna ride my bike... ain't that cool?! #weekend @marta 😀 café-bar 1,000.50km",
]

GROW = """
import json, sys
from pathlib import Path
from offline_mem.pinned.entities import SpacyEntities
from offline_mem.pinned.nlp import SpacyAnalyzer
from offline_mem.pinned.spacy_pipeline import load_spacy
folder, texts = Path(sys.argv[1]), json.loads(sys.argv[2])
analyzer, entities = SpacyAnalyzer(folder), SpacyEntities("en_core_web_sm")
message_terms = [a.terms for a in analyzer.analyze_terms(texts)]
first_query = [analyzer.analyze_query(t).terms for t in texts]
mentions_query = [[m.name for m in entities.extract_query(t)] for t in texts]
before = list(load_spacy(folder, entities=False).pipe_names)
terms = [a.terms for a in analyzer.analyze_batch(texts)]
found = [[(m.name, m.kind) for m in ms] for ms in entities.extract_batch(texts)]
nlp = load_spacy(folder)
grown = {"before": before, "after": list(nlp.pipe_names), "terms": terms, "found": found,
         "message_terms": message_terms,
         "query_terms": first_query, "query_mentions": mentions_query,
         "ents": [[(e.text, e.label_, e.start_char) for e in nlp(t).ents] for t in texts],
         "tokens": [[(t.text, t.whitespace_, t.lemma_, t.pos_, t.tag_, t.is_stop, t.like_num)
                     for t in nlp(x)] for x in texts],
         "tokenizer_config": nlp.config["nlp"]["tokenizer"]}
import spacy
whole = spacy.load(folder, exclude=["parser", "senter"])
reference = {"after": list(whole.pipe_names),
             "ents": [[(e.text, e.label_, e.start_char) for e in whole(t).ents] for t in texts],
             "tokens": [[(t.text, t.whitespace_, t.lemma_, t.pos_, t.tag_, t.is_stop, t.like_num)
                         for t in whole(x)] for x in texts]}
print(json.dumps({"grown": grown, "reference": reference}))
"""


def test_a_pipeline_grown_for_a_write_equals_one_loaded_whole(tmp_path: Path) -> None:
    folder = str(verified_model_dir("en_core_web_sm"))
    done = subprocess.run(
        [sys.executable, "-c", GROW, folder, json.dumps(TEXTS)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    grown, reference = result["grown"], result["reference"]
    assert "ner" not in grown["before"]  # searches alone never loaded the recogniser
    assert grown["after"] == reference["after"]
    assert grown["ents"] == reference["ents"]
    assert grown["tokens"] == reference["tokens"]
    assert grown["tokenizer_config"] == {"@tokenizers": "offline_mem.blank_tokenizer.v1"}
    assert grown["query_terms"] == grown["terms"]  # a query analyses as a write does
    assert grown["message_terms"] == grown["terms"]  # and a stored message, without entities
    assert any(found for found in grown["found"])
    assert "Hospital São João" in [name for name, _ in grown["found"][0]]
