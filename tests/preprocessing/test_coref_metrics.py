"""Coreference metrics against the official scorer's own test cases: every case of
conll/reference-coreference-scorers' ``test/CorefMetricTestConfig.pm`` (v8.01; copied unchanged
into coref_scorer_cases/, read here as the scorer's test.pl reads it) gives its expected recall,
precision and F1 of MUC, B-cubed and CEAF-e (and CEAF-m, where it gives them) within the
scorer's tolerance, 1e-4, through ``longformer-coref-score``."""
import ast
import itertools
import json
import operator
import os
import random
import re
import subprocess
import sys

import pytest

from longformer_preprocessing.evaluation.assignment import max_weight_matching
from longformer_preprocessing.evaluation.coref import conll_f1, score_documents
from longformer_preprocessing.tasks.coref_score import main, rpf_line

CASES_DIR = os.path.join(os.path.dirname(__file__), "coref_scorer_cases")
CHECKED = ("muc", "bcub", "ceafm", "ceafe")  # BLANC is not implemented
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _arithmetic(text):
    """The value of a Perl arithmetic expression of the config (numbers, + - * /, brackets)."""
    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"unexpected expression {text!r}")

    return value(ast.parse(text.strip(), mode="eval").body)


def _split_top_level(text):
    """Split on the commas outside brackets."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current]


def scorer_cases():
    """(id, key file, response file, {metric: (recall, precision, F1)}) of every test case."""
    with open(os.path.join(CASES_DIR, "CorefMetricTestConfig.pm"), encoding="utf-8") as f:
        text = "\n".join(line.split("#")[0] for line in f)  # Perl comments (commented-out metrics) go
    cases = []
    for block in re.findall(r"\{\s*id\s*=>.*?expected_metrics\s*=>\s*\{.*?\}", text, re.S):
        case_id = re.search(r'id\s*=>\s*"([^"]+)"', block).group(1)
        files = [os.path.join(CASES_DIR, os.path.basename(re.search(rf'{k}\s*=>\s*"([^"]+)"', block).group(1)))
                 for k in ("key_file", "response_file")]
        expected = {m: tuple(_arithmetic(v) for v in _split_top_level(values))
                    for m, values in re.findall(r'"(\w+)"\s*=>\s*\[([^\]]*)\]', block)}
        cases.append((case_id, *files, {m: v for m, v in expected.items() if m in CHECKED}))
    return cases


CASES = scorer_cases()


def test_the_config_is_read_whole():
    """Every case of the config (36: A1-A13, B1-L1, M1-M6, N1-N6), and the metric values it gives
    (counted by hand there): 28 MUC, 16 B-cubed, 10 CEAF-m, 10 CEAF-e (the others are commented out
    there or are BLANC's; B1 and C1 give BLANC only)."""
    assert len(CASES) == 36 and len({c[0] for c in CASES}) == 36
    counts = {m: sum(m in c[3] for c in CASES) for m in CHECKED}
    assert counts == {"muc": 28, "bcub": 16, "ceafm": 10, "ceafe": 10}
    assert CASES[1][3]["bcub"] == pytest.approx(((7 / 3) / 6, 3 / 3, 14 / 25))


def test_every_scorer_case_through_the_console_script(capsys):
    failures = []
    for case_id, key, response, expected in CASES:
        assert main([key, response, "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        for metric, values in expected.items():
            actual = (got[metric]["recall"], got[metric]["precision"], got[metric]["f1"])
            # test.pl's check: the summed absolute difference of recall, precision and F1 under 1e-4
            if sum(abs(a - e) for a, e in zip(actual, values)) >= 1e-4:
                failures.append((case_id, metric, actual, values))
    assert failures == []


def test_the_scorer_lines_and_the_conll_average(capsys):
    key, response = (os.path.join(CASES_DIR, n) for n in ("TC-A.key", "TC-A-4.response"))
    assert main([key, response]) == 0
    out = capsys.readouterr().out
    # A4: MUC 1/3 both ways; B-cubed (3 + 1/3)/6 and (1 + 4/3 + 1/2)/7; CEAF-e 0.73333 / 0.55
    assert "Coreference: Recall: (1 / 3) 33.33%\tPrecision: (1 / 3) 33.33%\tF1: 33.33%" in out
    assert "Coreference: Recall: (3.33333333333333 / 6) 55.55%\tPrecision: (2.83333333333333 / 7) 40.47%" in out
    f1 = lambda r, p: 2 * r * p / (r + p)  # noqa: E731
    mean = (1 / 3 + f1(5 / 9, 17 / 42) + f1(0.73333, 0.55)) / 3
    b_cubed = 100 * f1(5 / 9, 17 / 42)
    assert f"CoNLL score (mean F1 of muc 33.33, bcub {b_cubed:.2f}, ceafe 62.86): {100 * mean:.2f}" in out
    # 4 of the 6 key mentions found, among 7 response mentions
    assert "Identification of Mentions: Recall: (4 / 6) 66.66%\tPrecision: (4 / 7) 57.14%" in out


def test_counts_are_summed_over_documents_not_averaged():
    one = {"d1": [[(0, 0), (1, 1)]], "d2": [[(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]]}
    response = {"d1": [[(0, 0), (1, 1)]], "d2": [[(0, 0), (1, 1)]]}
    scores = score_documents(one, response)
    assert (scores["muc"].recall_num, scores["muc"].recall_den) == (2, 5)  # 1/1 + 1/4 links: 2/5, not 5/8
    assert scores["muc"].precision == 1.0
    assert score_documents(one, {})["muc"].recall == 0.0  # a key document without a response is empty
    assert conll_f1(score_documents(one, one)) == 1.0


def test_alignment_is_optimal_against_brute_force():
    rng = random.Random(0)
    for _ in range(200):
        rows, cols = rng.randint(1, 5), rng.randint(1, 5)
        w = [[rng.choice([0, 0, rng.random()]) for _ in range(cols)] for _ in range(rows)]
        pairs = max_weight_matching(w)
        assert len({i for i, _ in pairs}) == len(pairs) == len({j for _, j in pairs})
        n = max(rows, cols)
        square = [[w[i][j] if i < rows and j < cols else 0 for j in range(n)] for i in range(n)]
        best = max(sum(square[i][j] for i, j in enumerate(order)) for order in itertools.permutations(range(n)))
        assert sum(w[i][j] for i, j in pairs) == pytest.approx(best)


def test_rpf_line_cuts_percentages_as_perl_int():
    from longformer_preprocessing.evaluation.coref import Counts
    assert rpf_line(Counts(2, 3, 1, 1)) == "Recall: (2 / 3) 66.66%\tPrecision: (1 / 1) 100%\tF1: 80%"


BAD = "#begin document (nw/x); part 000\nnw/x 0 0 a 1)\n#end document\n"
GOOD = "#begin document (nw/x); part 000\nnw/x 0 0 a (1)\nnw/x 0 1 b (1)\n#end document\n"


@pytest.mark.parametrize("case, message", [
    ("missing", "KEY {d}/nope_conll: no such file or folder"),
    ("malformed", "RESPONSE {d}/bad_conll:2 (document (nw/x); part 000): mention closed that was never opened"),
    ("no common document", "no document of RESPONSE {d}/other_conll is in KEY"),
    ("word counts differ", "document nw/x_0: RESPONSE has 1 words, KEY 2"),
    ("repeats", "the response repeats 11 mentions (more than 10)"),
])
def test_bad_input_is_one_line_and_nonzero(tmp_path, capsys, case, message):
    (tmp_path / "key_conll").write_text(GOOD)
    (tmp_path / "bad_conll").write_text(BAD)
    (tmp_path / "other_conll").write_text(GOOD.replace("nw/x", "nw/y"))
    (tmp_path / "short_conll").write_text("#begin document (nw/x); part 000\nnw/x 0 0 a (1)\n#end document\n")
    (tmp_path / "repeats_conll").write_text(GOOD.replace("a (1)", "a " + "|".join(["(1)"] * 12)))
    key, response = {"missing": ("nope_conll", "key_conll"), "malformed": ("key_conll", "bad_conll"),
                     "no common document": ("key_conll", "other_conll"),
                     "word counts differ": ("key_conll", "short_conll"),
                     "repeats": ("key_conll", "repeats_conll")}[case]
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / key), str(tmp_path / response)])
    text = str(exit_.value.code)
    assert exit_.value.code != 0 and "\n" not in text and message.format(d=tmp_path) in text, text
    assert capsys.readouterr().out == ""


def test_the_installed_console_script_runs():
    """The entry point as installed (setup.py console_scripts), without torch or fairseq."""
    script = os.path.join(os.path.dirname(sys.executable), "longformer-coref-score")
    done = subprocess.run([script, os.path.join(CASES_DIR, "TC-A.key"), os.path.join(CASES_DIR, "TC-A-1.response"),
                           "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["conll_f1"] == 1.0
    probe = "import sys, longformer_preprocessing.tasks.coref_score; print('torch' in sys.modules, 'fairseq' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.split() == ["False", "False"]


def _random_clusters(rng, n_words, base=None):
    """Entities of random spans (nesting allowed); from ``base``: mentions dropped, moved to another
    entity, entities merged, twinless mentions added, now and then a mention repeated."""
    spans = [(s, min(n_words - 1, s + rng.choice([0, 0, 1, 2, 4]))) for s in range(n_words)]
    if base is None:
        chosen = rng.sample(spans, rng.randint(0, min(12, n_words)))
        entities = [[] for _ in range(rng.randint(1, 5))]
        for span in chosen:
            rng.choice(entities).append(span)
        return [e for e in entities if e]
    entities = [[m for m in e if rng.random() > 0.2] for e in base] + [[]]
    for e in list(entities):
        for m in list(e):
            if rng.random() < 0.15:
                e.remove(m)
                rng.choice(entities).append(m)
    if len(entities) > 2 and rng.random() < 0.3:
        entities[0] += entities.pop(1)
    for _ in range(rng.randint(0, 4)):
        rng.choice(entities).append(rng.choice(spans))  # twinless (or a repeat)
    return [e for e in entities if e]


@pytest.mark.skipif(not os.environ.get("LONGFORMER_COREF_SCORER"),
                    reason="set LONGFORMER_COREF_SCORER to a checkout of conll/reference-coreference-scorers")
def test_random_documents_agree_with_the_perl_scorer(tmp_path, capsys):
    """Opt-in: random keys and responses (several documents a file, one response missing) scored by
    the official scorer.pl (one process per metric) and here; every count equal."""
    import io

    from longformer_preprocessing.tasks.conll2012 import CorefDocument, write_document

    scorer = os.path.join(os.environ["LONGFORMER_COREF_SCORER"], "scorer.pl")
    rng = random.Random(int(os.environ.get("LONGFORMER_COREF_SEED", "0")))
    trials, compared = int(os.environ.get("LONGFORMER_COREF_TRIALS", "20")), 0
    for trial in range(trials):
        key_text, response_text = io.StringIO(), io.StringIO()
        for d in range(3):
            n = rng.randint(5, 30)
            doc = CorefDocument(f"nw/t{d}", "000", f"#begin document (nw/t{d}); part 000", [["w"] * n], [["-"] * n])
            key = _random_clusters(rng, n)
            try:
                write_document(key_text, doc, key)
                if d < 2:
                    write_document(response_text, doc, _random_clusters(rng, n, key))
            except ValueError:  # one entity's mentions crossing: no CoNLL file can hold it
                continue
        if not response_text.getvalue():
            continue
        (tmp_path / "key").write_text(key_text.getvalue())
        (tmp_path / "response").write_text(response_text.getvalue())
        assert main([str(tmp_path / "key"), str(tmp_path / "response"), "--json"]) == 0
        ours = json.loads(capsys.readouterr().out)
        for metric in CHECKED:
            done = subprocess.run(["perl", scorer, metric, str(tmp_path / "key"), str(tmp_path / "response"), "none"],
                                  capture_output=True, text=True)
            if "refusing to score" in done.stderr:
                break
            line = [x for x in done.stdout.splitlines() if x.startswith("Coreference:")][-1]
            theirs = [float(x) for pair in re.findall(r"\(([\d.e-]+) / ([\d.e-]+)\)", line) for x in pair]
            mine = [ours[metric][k] for k in ("recall_num", "recall_den", "precision_num", "precision_den")]
            assert mine == pytest.approx(theirs, rel=1e-9, abs=1e-9), (trial, metric, mine, theirs)
            compared += 1
    assert compared >= 2 * trials, compared  # most trials scored by both, all four metrics


def test_documents_pair_by_key_and_the_unpaired_are_said(tmp_path, capsys):
    two = GOOD + GOOD.replace("nw/x", "nw/z")
    (tmp_path / "key_conll").write_text(two)
    (tmp_path / "response_conll").write_text(GOOD.replace("nw/x", "nw/z") + GOOD.replace("nw/x", "nw/y"))
    assert main([str(tmp_path / "key_conll"), str(tmp_path / "response_conll"), "--json"]) == 0
    captured = capsys.readouterr()
    scores = json.loads(captured.out)
    assert (scores["muc"]["recall_num"], scores["muc"]["recall_den"]) == (1, 2)  # nw/z found, nw/x empty
    assert "1 KEY documents have no response" in captured.err and "1 RESPONSE documents are not in KEY" in captured.err


def test_headers_pair_literally_as_the_official_scorer_does(tmp_path, capsys):
    """The scorer pairs ``#begin document (ID); part 000`` with that exact text: a response header
    ``part 0`` (or two spaces) pairs with nothing, so that document scores as an empty response,
    and the warning names it; the score is the one without it."""
    two = GOOD + GOOD.replace("nw/x", "nw/z")
    (tmp_path / "key_conll").write_text(two)
    (tmp_path / "alone_conll").write_text(GOOD.replace("nw/x", "nw/z"))
    for header in ("#begin document (nw/x); part 0", "#begin document (nw/x);  part 000"):
        (tmp_path / "response_conll").write_text(GOOD.replace("#begin document (nw/x); part 000", header)
                                                 + GOOD.replace("nw/x", "nw/z"))
        assert main([str(tmp_path / "key_conll"), str(tmp_path / "response_conll"), "--json"]) == 0
        captured = capsys.readouterr()
        assert main([str(tmp_path / "key_conll"), str(tmp_path / "alone_conll"), "--json"]) == 0
        assert json.loads(captured.out) == json.loads(capsys.readouterr().out)  # as if nw/x had no response
        warning = [line for line in captured.err.splitlines() if "warning" in line]
        assert len(warning) == 1 and "'(nw/x); part 000'" in warning[0] and repr(header[len("#begin document "):]) \
            in warning[0]
