"""experiments/hotpotqa_small's data: HotpotQA records the reader takes whole, whose gold facts
answer the bridge question (the brother's paragraph names the bridge, the bridge's names the
town), each clause from a chapter of its own split."""
import json
import re

from longformer_experiments.hotpotqa_small.data import TOWNS, clause_pools, records
from longformer_experiments.runner import KJV
from longformer_preprocessing.tasks import hotpotqa
from longformer_preprocessing.tasks.examples import MultiHop


def test_records_are_read_whole_and_their_gold_facts_answer_the_question(tmp_path):
    made = records(KJV, 0, {"train": 30, "valid": 10}, 10)
    pools = clause_pools(KJV, 0)
    for split, items in made.items():
        (tmp_path / f"{split}.json").write_text(json.dumps(items))
        examples = list(hotpotqa.read(str(tmp_path / f"{split}.json")))
        assert len(examples) == len(items) and all(isinstance(e, MultiHop) for e in examples)
        for record in items:
            context = dict((title, sentences) for title, sentences in record["context"])
            assert len(context) == 10  # ten distinct titles
            (asked, i), (bridge, j) = record["supporting_facts"]
            assert record["question"] == f"Where dwelt the brother of {asked}?"
            assert re.fullmatch(rf" {asked}, who dwelt in (\w+), was the brother of {bridge}\.", context[asked][i])
            assert context[bridge][j] == f" {bridge} dwelt in {record['answer']}."
            assert all(sentences[0] in pools[split] for sentences in context.values())


def test_the_gold_paragraphs_hold_two_different_towns():
    """The asked person's own town is never the answer: on the gold pair a random town of the input
    is right half the time, so stage two beating it shows it read which town is the brother's."""
    made = records(KJV, 0, {"train": 60, "valid": 20}, 10)
    for record in made["train"] + made["valid"]:
        titles = {title for title, _ in record["supporting_facts"]}
        facts = [sentences[1] for title, sentences in record["context"] if title in titles]
        towns = {w.strip(".,") for fact in facts for w in fact.split() if w.strip(".,") in TOWNS}
        assert len(towns) == 2 and record["answer"] in towns
