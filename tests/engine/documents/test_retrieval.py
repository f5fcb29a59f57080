"""Retrieval: BM25 and dense rankings fused by RRF, neighbours joined, the token budget, whole
documents when they fit, and questions that look like FTS5 syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.documents.index import DocumentIndex
from engine.documents.index_errors import CollectionNotFound
from engine.documents.index_store import StoredChunk
from engine.documents.retrieval import (
    RRF_K,
    Retrieval,
    RetrievalMode,
    bm25_ranking,
    dense_ranking,
    fuse,
    retrieve,
    stitch,
)
from tests.engine.documents.hashing_embedder import HashingEmbedder
from tests.engine.documents.standins import make_index, write_doc

EMBEDDER = HashingEmbedder(dim=128)
BM25 = RetrievalMode.BM25


@pytest.fixture
def index(tmp_path: Path) -> DocumentIndex:
    idx = make_index(tmp_path / "documents.sqlite3")
    yield idx
    idx.close()


def indexed(index: DocumentIndex, folder: Path, docs: dict[str, list[str]], name: str = "c") -> DocumentIndex:
    for file, paragraphs in docs.items():
        write_doc(folder / file, paragraphs)
    index.create_collection(name)
    index.index_paths(name, [folder], EMBEDDER)
    return index


ANIMALS = {
    "kangaroo.txt": ["Kangaroos hop on strong hind legs across the Australian outback."],
    "wombat.txt": ["Wombats dig long burrows and sleep in them through the day."],
    "otter.txt": ["Sea otters float on their backs and crack shells with stones."],
    "owl.txt": ["Owls hunt mice at night with silent wings and sharp eyes."],
    "bee.txt": ["Bees carry pollen between flowers and make honey in the hive."],
    "salmon.txt": ["Salmon swim upstream to the river where they hatched."],
}


def ask(index: DocumentIndex, question: str, **kwargs: object) -> Retrieval:
    options = {"k": 5, "context_tokens": 0, "budget_tokens": 10_000, **kwargs}
    return retrieve(index, ["c"], question, EMBEDDER, **options)  # type: ignore[arg-type]


# -- fusion --------------------------------------------------------------------------------


def test_rrf_fusion_on_a_known_case() -> None:
    assert RRF_K == 60
    bm25 = [(1, 9.0), (2, 5.0), (3, 1.0)]
    dense = [(3, 0.9), (1, 0.8), (4, 0.7)]
    fused = fuse([bm25, dense])
    assert [chunk for chunk, _ in fused] == [1, 3, 2, 4]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[1][1] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2][1] == pytest.approx(1 / 62)
    assert fused[3][1] == pytest.approx(1 / 63)


def test_rrf_uses_ranks_not_scores_and_breaks_ties_by_chunk_id() -> None:
    # 7 scores 1000 in one list, 5 tops the other: the same ranks, so the same fused score.
    fused = fuse([[(7, 1000.0), (5, 0.1)], [(5, 0.5), (7, 0.4)]])
    assert fused == [(5, pytest.approx(1 / 61 + 1 / 62)), (7, pytest.approx(1 / 61 + 1 / 62))]
    assert fuse([[(2, 1.0)], [(4, 1.0)]], rrf_k=10) == [(2, 1 / 11), (4, 1 / 11)]
    assert fuse([]) == []


def test_hybrid_ranks_by_the_fusion_of_the_bm25_and_dense_rankings(
    index: DocumentIndex, tmp_path: Path
) -> None:
    indexed(index, tmp_path / "docs", ANIMALS)
    question = "which animals dig burrows or hunt at night"
    active = index.active(["c"])
    lexical = bm25_ranking(index, active, question, 50)
    dense = dense_ranking(index, active, question, EMBEDDER, 50)
    assert lexical and dense and [c for c, _ in lexical] != [c for c, _ in dense]
    got = ask(index, question, k=3)
    expected = fuse([lexical, dense])[:3]
    assert [e.chunk_ids for e in got.excerpts] == [(c,) for c, _ in expected]
    assert [e.score for e in got.excerpts] == pytest.approx([s for _, s in expected])
    assert [e.n for e in got.excerpts] == [1, 2, 3] and not got.whole and got.mode is RetrievalMode.HYBRID
    assert {e.path.name for e in got.excerpts[:2]} == {"wombat.txt", "owl.txt"}


def test_dense_only_and_bm25_only_follow_their_own_ranking(index: DocumentIndex, tmp_path: Path) -> None:
    indexed(index, tmp_path / "docs", ANIMALS)
    question = "honey from flowers"
    active = index.active(["c"])
    dense = ask(index, question, k=3, mode=RetrievalMode.DENSE)
    assert [e.chunk_ids[0] for e in dense.excerpts] == [
        c for c, _ in dense_ranking(index, active, question, EMBEDDER, 3)
    ]
    words = ask(index, question, k=3, mode=BM25)
    assert [e.chunk_ids[0] for e in words.excerpts] == [
        c for c, _ in bm25_ranking(index, active, question, 3)
    ]
    assert words.excerpts[0].path.name == "bee.txt" and words.excerpts[0].score > 0
    assert retrieve(index, ["c"], question, None, 3, context_tokens=0, budget_tokens=99, mode=BM25).excerpts
    with pytest.raises(ValueError, match="needs an embedder"):
        retrieve(index, ["c"], question, None, 3, context_tokens=0, budget_tokens=99)


def test_several_collections_are_searched_together(index: DocumentIndex, tmp_path: Path) -> None:
    indexed(index, tmp_path / "one", {"a.txt": ["Teapots are glazed in the kiln."]}, name="one")
    indexed(index, tmp_path / "two", {"b.txt": ["A kiln fires clay at high heat."]}, name="two")
    got = retrieve(index, ["one", "two", "one"], "kiln", EMBEDDER, 5, context_tokens=0, budget_tokens=500)
    assert sorted((e.collection, e.path.name) for e in got.excerpts) == [("one", "a.txt"), ("two", "b.txt")]
    with pytest.raises(CollectionNotFound):
        retrieve(index, ["nope"], "kiln", EMBEDDER, context_tokens=0)


def test_a_collection_with_nothing_indexed_gives_nothing(index: DocumentIndex) -> None:
    index.create_collection("c")
    got = ask(index, "anything")
    assert got.excerpts == () and got.tokens == 0 and not got.whole


# -- neighbours, budget --------------------------------------------------------------------


def test_chunks_that_follow_each_other_are_joined_into_one_excerpt(
    index: DocumentIndex, tmp_path: Path
) -> None:
    paragraphs = [
        "Opening words about nothing much.",
        "The alpha valve opens first.",
        "Then the beta pump starts.",
        "Unrelated filler text here.",
        "Finally the delta gauge settles.",
    ]
    indexed(index, tmp_path / "docs", {"manual.txt": paragraphs})
    got = ask(index, "alpha beta delta", k=3, mode=BM25)
    assert len(got.excerpts) == 2
    joined = next(e for e in got.excerpts if len(e.chunk_ids) == 2)
    alone = next(e for e in got.excerpts if len(e.chunk_ids) == 1)
    assert joined.text == "The alpha valve opens first.\n\nThen the beta pump starts."
    assert alone.text == "Finally the delta gauge settles."
    full = (tmp_path / "docs" / "manual.txt").read_text()
    assert full[joined.start : joined.end] == joined.text
    assert joined.tokens == sum(index.chunks(joined.chunk_ids)[c].tokens for c in joined.chunk_ids)
    scores = dict(bm25_ranking(index, index.active(["c"]), "alpha beta delta", 3))
    assert joined.score == max(scores[c] for c in joined.chunk_ids)
    assert [e.n for e in got.excerpts] == [1, 2] and got.excerpts[0].score >= got.excerpts[1].score


def _chunk(ordinal: int, text: str, start: int) -> StoredChunk:
    return StoredChunk(ordinal, 1, "c", Path("x.txt"), ordinal, text, None, "", start, start + len(text), 1)


def test_stitch_cuts_the_overlap_and_keeps_gaps() -> None:
    full = "The first sentence. The second sentence. The third one."
    a, b, c = _chunk(0, full[0:40], 0), _chunk(1, full[20:55], 20), _chunk(2, full[41:55], 41)
    assert stitch([a, b]) == full[:55]
    assert stitch([a, b, c]) == full[:55]  # a chunk inside the text so far adds nothing
    assert stitch([_chunk(0, "One.", 0), _chunk(1, "Two.", 5)]) == "One. Two."
    assert stitch([_chunk(0, "One.", 0), _chunk(1, "Two.", 6)]) == "One.\n\nTwo."
    assert stitch([_chunk(0, "One.", 0), _chunk(1, "Two.", 4)]) == "One.Two."


def test_the_excerpts_fit_the_token_budget_passing_over_a_chunk_too_large(
    index: DocumentIndex, tmp_path: Path
) -> None:
    docs = {
        "big.txt": ["Zebra " + "zebra stripes are black and white " * 6],
        "small1.txt": ["A zebra runs."],
        "small2.txt": ["Zebra foals stand within minutes."],
        "other.txt": ["Horses eat hay."],
    }
    indexed(index, tmp_path / "docs", docs)
    everything = ask(index, "zebra", k=5, mode=BM25)
    assert everything.excerpts[0].path.name == "big.txt"
    big = everything.excerpts[0].tokens
    got = ask(index, "zebra", k=5, mode=BM25, budget_tokens=big - 1)
    assert {e.path.name for e in got.excerpts} == {"small1.txt", "small2.txt"}
    assert got.tokens <= big - 1 and got.tokens == sum(e.tokens for e in got.excerpts)
    assert ask(index, "zebra", k=1, mode=BM25).tokens == big
    assert ask(index, "zebra", k=5, budget_tokens=0).excerpts == ()
    assert ask(index, "zebra", k=0).excerpts == ()


def test_the_default_budget_is_a_quarter_of_the_context(index: DocumentIndex, tmp_path: Path) -> None:
    indexed(index, tmp_path / "docs", {f"d{i}.txt": [f"Topic word number {i} here."] for i in range(8)})
    total = index.collection("c").tokens
    # The context is just too small for whole documents; a quarter of it is the budget.
    context = 2 * total - 2
    got = retrieve(index, ["c"], "topic word", EMBEDDER, 8, context_tokens=context)
    assert not got.whole and 0 < got.tokens <= context // 4


# -- whole documents -----------------------------------------------------------------------


def test_documents_that_fit_in_half_the_context_go_in_whole(index: DocumentIndex, tmp_path: Path) -> None:
    docs = {
        "a.txt": ["[page 1]", "Page one text.", "More on page one.", "[page 2]", "Page two text."],
        "b.txt": ["Notes without pages.", "Second note."],
    }
    indexed(index, tmp_path / "docs", docs)
    total = index.collection("c").tokens
    got = retrieve(index, ["c"], "unrelated question", EMBEDDER, 1, context_tokens=2 * total, budget_tokens=1)
    assert got.whole and [e.n for e in got.excerpts] == [1, 2, 3]
    assert [(e.path.name, e.page, e.text) for e in got.excerpts] == [
        ("a.txt", 1, "Page one text.\n\nMore on page one."),
        ("a.txt", 2, "Page two text."),
        ("b.txt", None, "Notes without pages.\n\nSecond note."),
    ]
    assert got.tokens == total
    just_over = retrieve(index, ["c"], "page", EMBEDDER, 1, context_tokens=2 * total - 1, budget_tokens=500)
    assert not just_over.whole and len(just_over.excerpts) == 1


# -- questions that look like syntax -------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        'what does "NEAR" AND (x OR y)* mean',
        "col:value ^start -minus NOT",
        'an unbalanced "quote',
        "NEAR(a b, 2)",
        "AND OR NOT",
        "🙂 🙂",
        "",
        "   ",
        "**",
        'a"b',
        "' OR 1=1; DROP TABLE chunks; --",
    ],
)
def test_questions_with_fts5_syntax_never_break_the_query(
    index: DocumentIndex, tmp_path: Path, question: str
) -> None:
    indexed(index, tmp_path / "docs", ANIMALS)
    got = ask(index, question, mode=BM25)
    assert isinstance(got.excerpts, tuple)
    assert index.collection("c").chunks == len(ANIMALS)  # nothing dropped, nothing injected
    ask(index, question)  # hybrid: the dense half answers even when the words find nothing


def test_unicode_questions_match_across_scripts_and_accents(index: DocumentIndex, tmp_path: Path) -> None:
    docs = {
        "cafe.txt": ["Le café est ouvert le matin."],
        "tokyo.txt": ["東京 タワー は 赤い"],
        "other.txt": ["Nothing to see."],
    }
    indexed(index, tmp_path / "docs", docs)
    assert ask(index, "cafe", mode=BM25).excerpts[0].path.name == "cafe.txt"  # accents folded
    assert ask(index, "CAFÉ?", mode=BM25).excerpts[0].path.name == "cafe.txt"
    assert ask(index, "東京", mode=BM25).excerpts[0].path.name == "tokyo.txt"
    assert ask(index, 'what is "not" near the café', mode=BM25).excerpts[0].path.name == "cafe.txt"


def test_by_number_finds_an_excerpt(index: DocumentIndex, tmp_path: Path) -> None:
    indexed(index, tmp_path / "docs", ANIMALS)
    got = ask(index, "otters", k=2)
    assert got.by_number(1) is got.excerpts[0] and got.by_number(3) is None


def test_bm25_leaves_out_words_too_common_to_matter_and_dense_still_answers(
    index: DocumentIndex, tmp_path: Path
) -> None:
    docs = {f"d{i:02d}.txt": [f"Common words fill chunk {i}."] for i in range(30)}
    docs["needle.txt"] = ["Common words and one zanzibar."]
    indexed(index, tmp_path / "docs", docs)
    active = index.active(["c"])
    # "common" is in all 31 chunks: over a cap of 10 it goes, "zanzibar" (1 chunk) stays.
    ranked = bm25_ranking(index, active, "common zanzibar", 50, max_postings=10)
    assert [index.chunks([c])[c].path.name for c, _ in ranked] == ["needle.txt"]
    assert len(bm25_ranking(index, active, "common zanzibar", 50, max_postings=100)) == 31
    assert bm25_ranking(index, active, "common words", 50, max_postings=10) == []
    got = ask(index, "common words", k=3, max_postings=10)
    assert len(got.excerpts) == 3  # the dense ranking alone
