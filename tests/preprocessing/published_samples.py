"""Small copies of the published long-document datasets, written in their exact schemas (file
layout, field names, nesting, markup) from the bundled KJV text, plus one bad record of each
kind the readers count. Each writer returns what it wrote (good and bad counts)."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Dict, List
from xml.sax.saxutils import escape, quoteattr

REPO = Path(__file__).resolve().parent.parent.parent
KJV = REPO / "data" / "kjv"


def paragraphs(count: int, seed: int, min_words: int = 20) -> List[str]:
    """``count`` KJV paragraphs of at least ``min_words`` words, in a seeded order."""
    found = []
    for book in sorted(KJV.glob("*.txt"))[:6]:
        found += [" ".join(p.split()) for p in book.read_text(encoding="utf-8").split("\n\n")
                  if len(p.split()) >= min_words]
    random.Random(seed).shuffle(found)
    return found[:count]


def write_aclimdb(root: Path, per_label: int, seed: int) -> Dict[str, int]:
    """``root/{pos,neg}/ID_RATING.txt`` reviews with ``<br />`` breaks, an ``unsup/`` folder and
    the bag-of-words files, plus bad files: a wrong name, a rating outside its folder, non-UTF-8,
    an empty review."""
    texts = paragraphs(2 * per_label + 4, seed)
    for label in ("pos", "neg", "unsup"):
        (root / label).mkdir(parents=True)
    for i in range(per_label):
        (root / "pos" / f"{i}_{7 + i % 4}.txt").write_text(texts[2 * i] + "<br /><br />A fine film.", encoding="utf-8")
        (root / "neg" / f"{i}_{1 + i % 4}.txt").write_text(texts[2 * i + 1] + "<br />Dull.", encoding="utf-8")
    (root / "unsup" / "0_0.txt").write_text(texts[-1], encoding="utf-8")
    (root / "labeledBow.feat").write_text("0 0:1\n")
    (root / "pos" / "notes.txt").write_text(texts[-2])
    (root / "pos" / f"{per_label}_2.txt").write_text(texts[-3])  # rating 2 under pos/
    (root / "neg" / f"{per_label}_3.txt").write_bytes(b"caf\xe9 au lait")  # Latin-1
    (root / "neg" / f"{per_label + 1}_4.txt").write_text("<br /> ")
    return {"examples": 2 * per_label, "file name not ID_RATING.txt": 1, "rating outside its folder's range": 1,
            "not UTF-8": 1, "empty review": 1}


def write_hyperpartisan(root: Path, count: int, seed: int) -> Dict[str, object]:
    """SemEval-2019 task 4 by-article files: ``articles-training-byarticle-20181122.xml`` (title
    attribute, ``<p>`` paragraphs with inline ``<a href>`` and ``<q>``) and
    ``ground-truth-training-byarticle-20181122.xml``; plus an article without a label, one with a
    label that is not true/false, an empty one."""
    root.mkdir(parents=True, exist_ok=True)
    texts = paragraphs(2 * count, seed)
    articles, truth, expected = ['<?xml version="1.0" encoding="UTF-8"?>', "<articles>"], \
        ['<?xml version="1.0" encoding="UTF-8"?>', "<articles>"], {}
    for i in range(count + 3):
        article_id = f"{i:07d}"
        title = f"Chapter {i}: {texts[2 * i % len(texts)][:30]}"
        first, second = texts[(2 * i + 1) % len(texts)], texts[(2 * i) % len(texts)]
        half = len(first) // 2
        body = (f"<p>{escape(first[:half])}<a href=\"https://example.com/{i}\" type=\"external\">"
                f"{escape(first[half:])}</a></p>\n<p><q>{escape(second)}</q></p>") if i != count + 2 else ""
        articles.append(f"<article id=\"{article_id}\" published-at=\"2017-09-10\" title={quoteattr(title)}>"
                        f"\n{body}\n</article>")
        if i < count:
            label = "true" if i % 2 else "false"
            expected[article_id] = (" ".join(title.split()) + "\n" + first + "\n" + second, label)
        else:
            label = "maybe" if i == count + 1 else "true"
        if i != count:  # article `count` has no label
            truth.append(f"<article id=\"{article_id}\" hyperpartisan=\"{label}\" labeled-by=\"article\" "
                         f"url=\"https://example.com/{i}\"/>")
    articles.append("</articles>")
    truth.append("</articles>")
    (root / "articles-training-byarticle-20181122.xml").write_text("\n".join(articles) + "\n", encoding="utf-8")
    (root / "ground-truth-training-byarticle-20181122.xml").write_text("\n".join(truth) + "\n", encoding="utf-8")
    return {"texts": expected, "article without a label in the ground truth": 1,
            "hyperpartisan label not true/false": 1, "empty article": 1}


def trivia_datum(question_id: str, question: str, value: str, aliases: List[str], pages: List[str]) -> dict:
    """One ``Data`` item as TriviaQA publishes it (Wikipedia setting)."""
    from longformer_preprocessing.evaluation.answers import triviaqa_normalize as normalize_answer

    return {"Answer": {"Aliases": aliases, "MatchedWikiEntityName": value,
                       "NormalizedAliases": sorted({normalize_answer(a) for a in aliases}),
                       "NormalizedMatchedWikiEntityName": normalize_answer(value),
                       "NormalizedValue": normalize_answer(value), "Type": "WikipediaEntity", "Value": value},
            "EntityPages": [{"DocSource": "TagMe", "Filename": page, "Title": page[:-4].replace("_", " ")}
                            for page in pages],
            "Question": question, "QuestionId": question_id, "QuestionSource": "http://www.example.com/",
            "SearchResults": []}


def write_triviaqa(root: Path, questions: int, seed: int, page_paragraphs: int = 3) -> Dict[str, object]:
    """``qa/wikipedia-{train,dev}.json`` and ``evidence/wikipedia/*.txt``: question i asks about a
    name that occurs in its page (inside the text and as "The <Name>'s"), the first dev question
    also lists question 1's page (two pages, one question); each file also holds a
    question whose page file is missing and one whose page escapes the evidence folder."""
    (root / "qa").mkdir(parents=True)
    evidence = root / "evidence" / "wikipedia"
    evidence.mkdir(parents=True)
    texts = paragraphs(questions * page_paragraphs * 2, seed)
    names = ["Abel", "Enoch", "Methuselah", "Lamech", "Noah", "Shem", "Japheth", "Terah", "Nahor", "Haran"]
    written = {}
    for split, offset in (("train", 0), ("dev", questions * page_paragraphs)):
        data = []
        for q in range(questions):
            name = names[q % len(names)]
            page = f"{name}_{split}_{q}.txt"
            body = texts[offset + q * page_paragraphs: offset + (q + 1) * page_paragraphs]
            text = f"{name} was the son. {body[0]}\n\n" + "\n\n".join(body[1:]) + f"\n\nThe {name}'s line ended."
            (evidence / page).write_text(text, encoding="utf-8")
            data.append(trivia_datum(f"tq_{split}_{q}", f"Who is page {q} of the {split} set about?", name,
                                     [name, f"{name} (Bible)"], [page]))
        if split == "dev" and questions > 1:  # the first dev question has a second page: question 1's
            data[0]["EntityPages"].append(data[1]["EntityPages"][0])
        data.append(trivia_datum(f"tq_{split}_missing", "Which page is missing?", "Nobody", ["Nobody"],
                                 ["Nobody_at_all.txt"]))
        data.append(trivia_datum(f"tq_{split}_escape", "Which page escapes?", "Secret", ["Secret"],
                                 ["../../secret.txt"]))
        (root / "qa" / f"wikipedia-{split}.json").write_text(json.dumps(
            {"Data": data, "Domain": "Wikipedia", "Split": split, "Version": 1.0, "VerifiedEval": False}),
            encoding="utf-8")
        written[split] = data
    (root / "secret.txt").write_text("Secret is here.")
    return {"data": written, "page file missing": 1, "page file outside the evidence folder": 1}


def write_arxiv(path: Path, count: int, seed: int, sentences: int = 12) -> Dict[str, object]:
    """Cohan et al. 2018's JSON lines: ``article_id``, ``article_text`` (sentences),
    ``abstract_text`` (``<S> sentence </S>``), ``labels``, ``section_names``, ``sections``; plus a
    broken line, an article without ``abstract_text`` and one with an empty article."""
    texts = paragraphs(count * 2, seed)
    lines, pairs = [], []
    for i in range(count):
        article = [s.strip() + "." for s in texts[2 * i].split(".") if s.strip()] * (sentences // 2)
        abstract = [s.strip() + "." for s in texts[2 * i + 1].split(".") if s.strip()][:2]
        lines.append(json.dumps({"article_id": f"{1000 + i}.{seed:04d}", "article_text": article,
                                 "abstract_text": [f"<S> {s} </S>" for s in abstract], "labels": None,
                                 "section_names": ["introduction"], "sections": [article]}))
        pairs.append((" ".join(article), " ".join(abstract)))
    lines.append('{"article_id": "broken", "article_text": [')
    lines.append(json.dumps({"article_id": "x", "article_text": ["one sentence."]}))
    lines.append(json.dumps({"article_id": "y", "article_text": ["  "], "abstract_text": ["<S> a . </S>"]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"pairs": pairs, "broken JSON": 1, "missing or non-list 'abstract_text'": 1, "empty 'article_text'": 1}
