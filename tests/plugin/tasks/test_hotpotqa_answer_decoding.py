"""``--answer-decoding evidence``: the answer span is the best one inside the paragraphs of the
decoded supporting facts. The reference finds each token's paragraph from the paragraph score
positions (titles), not from the ``[s]`` markers the decoder walks, and searches every span."""
import math

import torch

from tests.support.finetune_models import batch, task_and_model
from tests.support.hotpotqa_data import hotpotqa_data  # noqa: F401  (fixture)

from fairseq_longformer.criterions.hotpotqa_decoding import decode, span_log_probs, two_paragraph_evidence


def reference_span(start_lp, end_lp, paragraph_starts, chosen, max_answer):
    """(first, last) token of the best span whose tokens all sit in a chosen paragraph (a token
    belongs to the last paragraph starting at or before it), by trying every pair."""
    def paragraph(t):
        return max(p for p, s in enumerate(paragraph_starts) if s <= t) if t >= paragraph_starts[0] else -1
    best, span = -math.inf, None
    n = len(start_lp)
    for s in range(n):
        for e in range(s, min(n, s + max_answer)):
            score = start_lp[s] + end_lp[e]
            if paragraph(s) in chosen and paragraph(e) in chosen and score > best:
                best, span = score, (s, e)
    return span


def test_evidence_decoding_answers_from_the_chosen_paragraphs(hotpotqa_data):  # noqa: F811
    task, model, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa")
    sample = batch(task, "valid", range(len(task.load_dataset("valid"))))
    with torch.no_grad():
        out, _ = model(**sample["net_input"], span_head_name=task.cfg.hotpotqa_head_name)
    generator = torch.Generator().manual_seed(0)
    out = {**out, "span": torch.randn(out["span"].shape, generator=generator) * 4,
           "paragraph": torch.randn(out["paragraph"].shape, generator=generator) * 4,
           "type": torch.tensor([[9.0, 0.0, 0.0]]).expand_as(out["type"])}  # every answer a span
    start_lp, end_lp = span_log_probs(out["span"], sample["context_token"])
    anywhere = decode(sample, out, start_lp, end_lp, 5, "two_paragraphs")
    evidence = decode(sample, out, start_lp, end_lp, 5, "two_paragraphs", "evidence")
    differs = 0
    for row, record in enumerate(sample["records"]):
        assert evidence[row][1] == anywhere[row][1]  # the supporting facts do not change
        starts = [int(p) for p, ok in zip(sample["paragraph_positions"][row], sample["paragraph_valid"][row]) if ok]
        owner = [p for p, (_, count) in enumerate(record["paragraphs"]) for _ in range(count)]
        sentences = [float(out["sentence"][row, p]) for p, ok in
                     zip(sample["sentence_positions"][row], sample["sentence_valid"][row]) if ok]
        paragraphs = [float(out["paragraph"][row, p]) for p in starts]
        chosen = {owner[k] for k in two_paragraph_evidence(paragraphs, sentences, owner)}
        s, e = reference_span(start_lp[row].tolist(), end_lp[row].tolist(), starts, chosen, 5)
        chars = record["token_chars"]
        first, last = int(sample["context_token"][row, s]), int(sample["context_token"][row, e])
        assert evidence[row][0] == record["text"][chars[first][0]:chars[last][1]]
        differs += evidence[row][0] != anywhere[row][0]
    assert differs > 0  # the sample has a best span outside the evidence, so the test can fail


def test_select_paragraphs_decodes_the_answer_as_the_task_says(hotpotqa_data):  # noqa: F811
    """longformer-select-paragraphs' scoring (``score_split``) decodes the answer as asked (the
    checkpoint's --answer-decoding), not always anywhere."""
    from fairseq_longformer.cli.hotpotqa_selection import score_split

    task, model, _ = task_and_model(hotpotqa_data, "longformer_hotpotqa")
    dataset = task.load_dataset("valid")

    def decisive(**net_input):  # an untrained model's outputs made decisive, a function of each row's
        out, extra = model(**net_input)  # own tokens, so the batch order does not matter
        tokens = net_input["src_tokens"].float()
        where = torch.arange(tokens.shape[1]).float()
        noise = torch.sin(tokens[..., None] * 12.9898 + where[None, :, None] * 78.233
                          + torch.arange(2).float() * 3.1) * 4
        return {**out, "span": noise.expand_as(out["span"]), "paragraph": noise[..., 0].view_as(out["paragraph"]),
                "type": torch.tensor([[9.0, 0.0, 0.0]]).expand_as(out["type"])}, extra

    head = task.cfg.hotpotqa_head_name
    with torch.no_grad():
        evidence = {side["id"]: scored["two_paragraphs"][0]
                    for side, scored in score_split(decisive, dataset, head, 5, 4, "cpu", "evidence")}
        anywhere = {side["id"]: scored["two_paragraphs"][0] for side, scored in score_split(decisive, dataset, head, 5, 4, "cpu")}
        sample = batch(task, "valid", range(len(dataset)))
        out, _ = decisive(**sample["net_input"], span_head_name=head)
    start_lp, end_lp = span_log_probs(out["span"], sample["context_token"])
    expected = decode(sample, out, start_lp, end_lp, 5, "two_paragraphs", "evidence")
    assert evidence == {record["id"]: answer for record, (answer, _) in zip(sample["records"], expected)}
    assert evidence != anywhere  # some best span lies outside the evidence, so the test can fail
