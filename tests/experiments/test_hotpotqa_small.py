"""experiments/hotpotqa_small's data: HotpotQA records the reader takes whole, whose gold facts
answer the bridge question (the brother's paragraph names the bridge, the bridge's names the
town), each clause from a chapter of its own split."""
import json

from longformer_experiments.hotpotqa_small.data import clause_pools, records
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
            assert context[asked][i] == f" {asked} was the brother of {bridge}."
            assert context[bridge][j] == f" {bridge} dwelt in {record['answer']}."
            assert all(sentences[0] in pools[split] for sentences in context.values())
