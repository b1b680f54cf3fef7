"""TriviaQA (Joshi et al. 2017), Wikipedia setting, as published (``triviaqa-rc.tar.gz``):
``qa/wikipedia-{train,dev}.json`` = ``{"Data": [{"Question", "QuestionId", "Answer": {"Aliases",
"NormalizedAliases", "Value", "NormalizedValue", ...}, "EntityPages": [{"DocSource",
"Filename", "Title"}], ...}], "Domain": "Wikipedia", "Split", "Version"}``, and the pages as
UTF-8 text files ``evidence/wikipedia/<Filename>``.

Examples: one per question and page. Every occurrence of every normalized alias in the page is
an answer span (``answer_spans.alias_occurrences``: linear in the page). Training keeps a page's
first ``--max-train-context-tokens`` wordpieces (4,096 by default: one input of the paper's
model) and drops a page with no answer there, as the paper's training (allenai's
``triviaqa.py``) drops question-page pairs without an answer; valid/test keep every page whole,
answer found or not, for evaluation over overlapping chunks of the whole page, scored with
TriviaQA's normalization against the normalized aliases. Bad records: a file that is not the
published JSON, a question without text, aliases or pages, a page file missing, outside the
evidence folder or not UTF-8, an empty page.
"""
from __future__ import annotations

import json
import os
from typing import Iterator, Optional, Union

from ..evaluation.answers import triviaqa_normalize
from .answer_spans import alias_occurrences, words_of
from .examples import QA, BadExample


def load_questions(path: str) -> list:
    """``Data`` of a TriviaQA question file; ValueError naming the file when it is not one."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path} is not a TriviaQA JSON file ({e}): pass qa/wikipedia-train.json or -dev.json")
    if not isinstance(data, dict) or not isinstance(data.get("Data"), list):
        raise ValueError(f"{path} has no 'Data' list: pass TriviaQA's qa/wikipedia-train.json or -dev.json")
    return data["Data"]


def read_page(evidence: str, filename) -> str:
    if not isinstance(filename, str) or not filename:
        raise BadExample("page without 'Filename'")
    root = os.path.realpath(evidence)
    path = os.path.realpath(os.path.join(root, filename))
    if os.path.commonpath([root, path]) != root:
        raise BadExample("page file outside the evidence folder")
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        raise BadExample("page file missing") from None
    except UnicodeDecodeError:
        raise BadExample("page file not UTF-8") from None
    except OSError:
        raise BadExample("page file unreadable") from None
    if not text.strip():
        raise BadExample("empty page")
    return text


def _aliases(answer) -> list:
    if not isinstance(answer, dict):
        raise BadExample("question without 'Answer'")
    aliases = [a for a in answer.get("NormalizedAliases") or [] if isinstance(a, str) and a.strip()]
    aliases += [triviaqa_normalize(a) for a in answer.get("Aliases") or [] if isinstance(a, str)]
    aliases = sorted({a for a in aliases if a})
    if not aliases:
        raise BadExample("answer without aliases")
    return aliases


def read(path: str, evidence: str, training: bool, max_train_tokens: Optional[int]) -> Iterator[Union[QA, BadExample]]:
    for datum in load_questions(path):
        try:
            if not isinstance(datum, dict):
                raise BadExample("question not a JSON object")
            question = datum.get("Question")
            if not isinstance(question, str) or not question.strip():
                raise BadExample("question without 'Question' text")
            aliases = _aliases(datum.get("Answer"))
            pages = datum.get("EntityPages")
            if not isinstance(pages, list) or not pages:
                raise BadExample("question without 'EntityPages'")
        except BadExample as e:
            yield e
            continue
        for page in pages:
            try:
                context = read_page(evidence, page.get("Filename") if isinstance(page, dict) else None)
            except BadExample as e:
                yield e
                continue
            words = words_of(context)
            spans = alias_occurrences([context[s:e] for s, e in words], aliases)
            yield QA(question, context, spans, gold=aliases, normalization="triviaqa",
                     max_context_tokens=max_train_tokens if training else None, require_answer=training,
                     key={"question_id": datum.get("QuestionId"), "page": page.get("Filename")})
