"""The CoNLL-2012 reader and writer (longformer_preprocessing.tasks.conll2012) on schema-exact
samples: every marking form, speakers, genre, several parts, each malformed kind; clusters
checked by hand."""
import io

import pytest

from longformer_preprocessing.tasks import conll2012
from longformer_preprocessing.tasks.conll2012 import coref_column, read_documents, write_document

DOC = "bc/cctv/00/cctv_0001"


def _row(part, i, word, pos, parse, speaker, ne, coref, args=("*",)):
    """One OntoNotes row: id, part, word number, word, POS, parse bit, lemma, frameset, sense,
    speaker, named entities, predicate arguments, coreference (aligned with spaces, as published)."""
    return "   ".join([DOC, str(part), str(i), word, pos, parse, "-", "-", "-", speaker, ne, *args, coref])


# part 000: 13 columns in the first sentence (one predicate), 12 in the second (none);
# part 001: 12 columns. Marks: nested mentions of one entity opened on one word ("(0|(0") and
# closed on one word ("0)|0)"), a one-word mention beside an opening ("(0)|(1"), one-word mentions
SAMPLE = "\n".join([
    f"#begin document ({DOC}); part 000",
    _row(0, 0, "Paula", "NNP", "(TOP(S(NP(NP*", "Paula_Zahn", "(PERSON*", "(0|(0", ("(ARG0*",)),
    _row(0, 1, "Zahn", "NNP", "*)", "Paula_Zahn", "*)", "0)", ("*",)),
    _row(0, 2, ",", ",", "*", "Paula_Zahn", "*", "-", ("*",)),
    _row(0, 3, "the", "DT", "(NP*", "Paula_Zahn", "*", "(0", ("*",)),
    _row(0, 4, "host", "NN", "*))", "Paula_Zahn", "*", "0)|0)", ("*)",)),
    _row(0, 5, ",", ",", "*", "Paula_Zahn", "*", "-", ("*",)),
    _row(0, 6, "met", "VBD", "(VP*", "Paula_Zahn", "*", "-", ("(V*)",)),
    _row(0, 7, "her", "PRP$", "(NP*", "Paula_Zahn", "*", "(0)|(1", ("(ARG1*",)),
    _row(0, 8, "sister", "NN", "*))", "Paula_Zahn", "*", "1)", ("*)",)),
    _row(0, 9, ".", ".", "*))", "Paula_Zahn", "*", "-", ("*",)),
    "",
    _row(0, 0, "She", "PRP", "(TOP(S(NP*)", "Jane_Doe", "*", "(1)", ()),
    _row(0, 1, "smiled", "VBD", "(VP*)", "Jane_Doe", "*", "-", ()),
    _row(0, 2, ".", ".", "*))", "Jane_Doe", "*", "-", ()),
    "",
    "#end document",
    f"#begin document ({DOC}); part 001",
    _row(1, 0, "It", "PRP", "(TOP(S(NP*)", "-", "*", "(5)", ()),
    _row(1, 1, "rained", "VBD", "(VP*)", "-", "*", "-", ()),
    _row(1, 2, ".", ".", "*))", "-", "*", "-", ()),
    "",
    "#end document",
]) + "\n"


def test_every_marking_form_gives_the_hand_checked_clusters(tmp_path):
    path = tmp_path / "cctv_0001.v4_gold_conll"
    path.write_text(SAMPLE)
    documents, bad = read_documents(str(path), min_columns=12)
    assert bad == []
    first, second = documents
    assert (first.key, first.doc_id, first.part, first.genre) == (f"{DOC}_0", DOC, "000", "bc")
    assert second.key == f"{DOC}_1"
    assert first.sentences == [["Paula", "Zahn", ",", "the", "host", ",", "met", "her", "sister", "."],
                               ["She", "smiled", "."]]
    assert first.speakers == [["Paula_Zahn"] * 10, ["Jane_Doe"] * 3]
    # entity 0: "Paula Zahn" (0-1), "the host" (3-4), "Paula Zahn, the host" (0-4) closed last-in-
    # first-out on "host", "her" (7); entity 1: "her sister" (7-8), "She" (10, document words)
    assert first.entities == {"0": [(0, 1), (3, 4), (0, 4), (7, 7)], "1": [(7, 8), (10, 10)]}
    assert first.clusters == [[(0, 1), (3, 4), (0, 4), (7, 7)], [(7, 8), (10, 10)]]
    assert second.entities == {"5": [(0, 0)]} and second.speakers == [["-", "-", "-"]]


def test_a_folder_reads_gold_files_over_their_auto_twins(tmp_path):
    (tmp_path / "bc").mkdir()
    (tmp_path / "bc" / "a.v4_gold_conll").write_text(SAMPLE)
    (tmp_path / "bc" / "a.v4_auto_conll").write_text(SAMPLE.replace("(5)", "-"))
    (tmp_path / "notes.txt").write_text("not a conll file\n")
    documents, bad = read_documents(str(tmp_path))
    assert [d.key for d in documents] == [f"{DOC}_0", f"{DOC}_1"] and bad == []
    assert documents[1].entities == {"5": [(0, 0)]}


BAD = """#begin document (nw/a); part 000
nw/a 0 0 x (3
nw/a 0 1 y -
#end document
#begin document (nw/b); part 000
nw/b 0 0 x 4)
#end document
#begin document (nw/c); part 000
#end document
#begin document (nw/d); part 000
nw/d 0 0 x -
nw/d 0 1 y * -

nw/d 0 0 z -
#end document
#begin document (nw/e); part 000
nw/e 0 0 x (7x
#end document
stray row
#begin document (nw/ok); part 000
nw/ok 0 0 x (1)
nw/ok 0 1 y -

nw/ok 0 0 z (1)
#end document
#begin document (nw/ok); part 000
nw/ok 0 0 x -
#end document
#begin document (nw/f); part 000
nw/f 0 0 x -
"""


def test_each_malformed_kind_is_counted_and_dropped(tmp_path):
    path = tmp_path / "bad_conll"
    path.write_text(BAD)
    documents, bad = read_documents(str(path))
    assert [d.key for d in documents] == ["nw/ok_0"]
    assert documents[0].entities == {"1": [(0, 0), (2, 2)]} and documents[0].sentences == [["x", "y"], ["z"]]
    assert [b.reason for b in bad] == [
        conll2012.UNBALANCED, conll2012.NEVER_OPENED, conll2012.EMPTY, conll2012.COLUMNS_DISAGREE,
        conll2012.UNREADABLE, conll2012.OUTSIDE, conll2012.REPEATED, conll2012.UNTERMINATED]
    assert str(bad[1]) == f"{path}:6 (document (nw/b); part 000): {conll2012.NEVER_OPENED}"
    # rows with fewer columns than OntoNotes' 12 are bad where the caller asks for 12
    _, strict = read_documents(str(path), min_columns=12)
    assert conll2012.too_few_columns(12) in {b.reason for b in strict}


def test_written_predictions_read_back_as_the_same_clusters():
    out = io.StringIO()
    (doc, _), _ = read_documents_from_text(SAMPLE)
    predicted = [[(0, 4), (0, 1), (3, 4), (7, 7), (10, 10)], [(7, 8)], [(9, 9), (11, 12)]]
    write_document(out, doc, predicted)
    text = out.getvalue()
    assert text.startswith(f"#begin document ({DOC}); part 000\n") and text.endswith("\n\n#end document\n")
    (again,), bad = read_documents_from_text(text, min_columns=12)
    assert bad == [] and again.key == doc.key and again.sentences == doc.sentences
    assert again.speakers == doc.speakers
    assert sorted(map(sorted, again.clusters)) == sorted(map(sorted, predicted))
    # a cell: closings, then one-word mentions, then openings
    assert coref_column(4, {"2": [(0, 3), (1, 1)], "9": [(1, 2)]}) == ["(2", "(2)|(9", "9)", "2)"]


def test_clusters_the_brackets_cannot_hold_are_refused():
    with pytest.raises(ValueError, match="cross"):
        coref_column(6, [[(0, 3), (3, 5)]])  # one entity's mentions overlapping at word 3
    with pytest.raises(ValueError, match="outside"):
        coref_column(3, [[(1, 3)]])


def read_documents_from_text(text, min_columns=1):
    documents, bad = [], []
    for item in conll2012.parse_lines(io.StringIO(text), "<text>", min_columns):
        (documents if isinstance(item, conll2012.CorefDocument) else bad).append(item)
    return documents, bad


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin1_conll"
    path.write_bytes("#begin document (nw/a); part 000\nnw/a 0 0 caf\xe9 -\n#end document\n".encode("latin-1"))
    with pytest.raises(ValueError, match=f"{path} is not UTF-8 text"):
        read_documents(str(path))
