"""HotpotQA-format bridge questions from the bundled KJV (see the package's docstring)."""
import random
import re
from pathlib import Path
from typing import Dict, List

from longformer_experiments.kjv import chapters, split_of

PEOPLE = ("Abner", "Boaz", "Caleb", "Deborah", "Gideon", "Hiram", "Ittai", "Jethro", "Laban", "Naomi", "Obed",
          "Phinehas", "Rizpah", "Shimei", "Uriah", "Zadok")
TOWNS = ("Bethel", "Gilgal", "Hebron", "Jericho", "Shiloh", "Mizpeh", "Ramah", "Zoar")
FILLER_WORDS = 12  # words of KJV text before each paragraph's fact sentence


def chapter_pools(kjv: Path, seed: int) -> Dict[str, List[tuple]]:
    """split -> (chapter title, a short KJV clause from it): valid chapters never appear in train."""
    pools = {"train": [], "valid": []}
    for _, title, text in chapters(kjv):
        words = re.sub(r"[^A-Za-z ,;:]", "", text).split()
        pools[split_of(title, seed)].append((title, " ".join(words[:FILLER_WORDS]) + "."))
    return pools


def record(rng: random.Random, pool: List[tuple], paragraphs: int, key: str) -> dict:
    """One bridge question over ``paragraphs`` paragraphs, half chapters (keepers) and half people."""
    n_chapters = paragraphs // 2
    picked = rng.sample(pool, n_chapters + paragraphs - n_chapters)
    chapter_list, fillers = picked[:n_chapters], [clause for _, clause in picked[n_chapters:]]
    people = rng.sample(PEOPLE, paragraphs - n_chapters)
    keeper = people[0]  # the gold chapter's keeper, whose paragraph is in the context
    context = []
    for i, (title, clause) in enumerate(chapter_list):
        who = keeper if i == 0 else rng.choice([p for p in PEOPLE if p != keeper])
        context.append([title, [clause, f" The keeper of this chapter was {who}."]])
    towns = [rng.choice(TOWNS) for _ in people]
    for person, town, clause in zip(people, towns, fillers):
        context.append([person, [clause, f" {person} dwelt in {town}."]])
    gold_chapter = chapter_list[0][0]
    rng.shuffle(context)
    return {"_id": key, "question": f"Where dwelt the keeper of {gold_chapter}?", "answer": towns[0],
            "type": "bridge", "level": "easy", "supporting_facts": [[gold_chapter, 1], [keeper, 1]],
            "context": context}


def records(kjv: Path, seed: int, counts: Dict[str, int], paragraphs: int) -> Dict[str, list]:
    rng, pools = random.Random(seed), chapter_pools(kjv, seed)
    return {split: [record(rng, pools[split], paragraphs, f"kjv_{split}_{i}") for i in range(n)]
            for split, n in counts.items()}
