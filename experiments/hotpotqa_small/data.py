"""HotpotQA-format bridge questions over KJV text (see the package's docstring).

Names and towns are closed sets (16 and 8): a 2-layer model trained from scratch learns to match a
name among a few far sooner than among an open vocabulary (``finetune_kjv``'s note on cues).
"""
import random
import re
from pathlib import Path
from typing import Dict, List

from longformer_experiments.kjv import chapters, split_of

PEOPLE = ("Abner", "Boaz", "Caleb", "Deborah", "Gideon", "Hiram", "Ittai", "Jethro", "Laban", "Naomi", "Obed",
          "Phinehas", "Rizpah", "Shimei", "Uriah", "Zadok")
TOWNS = ("Bethel", "Gilgal", "Hebron", "Jericho", "Shiloh", "Mizpeh", "Ramah", "Zoar")
FILLER_WORDS = 8  # words of KJV text before each paragraph's fact sentence


def clause_pools(kjv: Path, seed: int) -> Dict[str, List[str]]:
    """split -> short KJV clauses (the chapter's first words): valid's from chapters train never sees."""
    pools = {"train": [], "valid": []}
    for _, title, text in chapters(kjv):
        words = re.sub(r"[^A-Za-z ,;:]", "", text).split()
        pools[split_of(title, seed)].append(" ".join(words[:FILLER_WORDS]) + ".")
    return pools


def record(rng: random.Random, clauses: List[str], paragraphs: int, key: str) -> dict:
    """One bridge question, "Where dwelt the brother of A?": A's paragraph names A's own town U and
    the brother B, B's paragraph B's town T (U != T, so the gold pair holds two towns and the reader
    must find which one is the brother's). The other paragraphs: half name someone's town and
    brother, half someone's town."""
    people = rng.sample(PEOPLE, paragraphs)
    brothers = people[:paragraphs // 2]  # paragraphs "X, who dwelt in U, was the brother of Y."
    dwellers = people[paragraphs // 2:]  # paragraphs "Y dwelt in T."
    asked, bridge = brothers[0], dwellers[0]
    towns = [rng.choice(TOWNS) for _ in dwellers]
    own_towns = [rng.choice([t for t in TOWNS if t != towns[0]])] + [rng.choice(TOWNS) for _ in brothers[1:]]
    context = []
    for i, (person, own) in enumerate(zip(brothers, own_towns)):
        other = bridge if i == 0 else rng.choice([p for p in PEOPLE if p not in (person, bridge)])
        context.append([person, [rng.choice(clauses), f" {person}, who dwelt in {own}, was the brother of {other}."]])
    for person, town in zip(dwellers, towns):
        context.append([person, [rng.choice(clauses), f" {person} dwelt in {town}."]])
    rng.shuffle(context)
    return {"_id": key, "question": f"Where dwelt the brother of {asked}?", "answer": towns[0],
            "type": "bridge", "level": "easy", "supporting_facts": [[asked, 1], [bridge, 1]], "context": context}


def records(kjv: Path, seed: int, counts: Dict[str, int], paragraphs: int) -> Dict[str, list]:
    rng, pools = random.Random(seed), clause_pools(kjv, seed)
    return {split: [record(rng, pools[split], paragraphs, f"kjv_{split}_{i}") for i in range(n)]
            for split, n in counts.items()}
