"""The checks a fact of the model's answer passes before admission: one interface
(base.FactCheck, with the add's CheckContext), run in order by pipeline.check_facts; their
words come from the language's lexicon (extraction/lexicon.py)."""
