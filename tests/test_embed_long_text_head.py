"""A long text is tokenized from a head of it: the same token ids, the same vector.

The embedder keeps a text's first max_length tokens (256); tokenizing all of a 1 MB turn to
keep them cost ~0.5 s of CPU, so the first context over 10 such turns paid ~5 s in its
catch-up. `OnnxSession.encode` now tokenizes a head cut before a space (where the
pre-tokenizer splits), taken only where the head's own tokens overflow max_length, else
one twice as long. Whatever the text, the ids must be those of the whole text."""

from __future__ import annotations

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tiermem.tiers.embed_onnx import FastEmbedder, OnnxSession, head_chars, text_head

LOREM = "lorem ipsum dolor sit amet "

# texts, each past the first head (256 tokens x HEAD_CHARS_PER_TOKEN = 2,048 characters) or at its edges
TEXTS = [
    "0 " + (LOREM * 40_000)[:1_000_000],  # the reviewer's 1 MB turn: the first head holds enough tokens
    "x" * 5_000 + " " + LOREM * 200,  # no space within the head: cut at the first space after it
    "x" * 5_000,  # one word, no space at all: tokenized whole
    "supercalifragilistic" * 150 + " " + LOREM * 100,  # a word past WordPiece's 100 chars: [UNK], few tokens
    "a " * 1_023 + "b c d",  # exactly at the head's edge: a space at character 2,047
    "word\n\n\t  " * 500,  # runs of whitespace other than spaces: the head ends inside a run
    "Ünïcödé naïve Straße ΣΟΦΟΣ λόγος " * 200,  # accents stripped, final sigma, lower-cased by the normalizer
    "日本語のテキスト" * 500 + " tail",  # CJK: a token per character, no space until the end
    "short text, fewer tokens than max_length",  # shorter than the head: whole
    "  " + LOREM * 300 + "  ",  # leading and trailing spaces: stripped first, as before
    "x " * 60 + "y" * 3_000 + " z" * 10,  # too few tokens in the first head (a long [UNK] word): heads double
]


def _whole(session: OnnxSession, texts: list[str]) -> list[list[int]]:
    """The ids as the session took them before: every text tokenized whole."""
    prepared = [t.strip().lower() if session.lower else t.strip() for t in texts]
    return [e.ids for e in session.tokenizer.encode_batch(prepared)]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_a_head_gives_the_whole_texts_ids(embedder: FastEmbedder, text: str) -> None:
    session = embedder._session
    assert session is not None and session._head_chars is not None  # the default model takes heads
    got = session.encode([text])
    assert [e.ids for e in got] == _whole(session, [text])
    assert [e.type_ids for e in got] == [[0] * len(got[0].ids)]


def test_a_batch_mixing_long_and_short_texts(embedder: FastEmbedder) -> None:
    session = embedder._session
    assert session is not None
    got = session.encode(TEXTS)  # one batch: heads that overflow, heads that double, whole texts
    assert [e.ids for e in got] == _whole(session, TEXTS)


def test_the_vector_of_a_long_turn_is_unchanged(embedder: FastEmbedder) -> None:
    session = embedder._session
    assert session is not None
    text = TEXTS[0]
    whole = session.tokenizer.encode_batch([text.strip()])
    assert np.array_equal(session.run([text]), session.run_encoded(whole))


# (pre-tokenizer, whether heads are taken)
PRE_TOKENIZERS = [
    (pre_tokenizers.BertPreTokenizer(), True),  # splits at every space: heads
    (pre_tokenizers.WhitespaceSplit(), True),  # the same
    (pre_tokenizers.ByteLevel(), False),  # a space belongs to the word after it: not known safe, whole texts
    (pre_tokenizers.Metaspace(), False),  # SentencePiece's: whole texts
]


@pytest.mark.parametrize(("pre", "heads"), PRE_TOKENIZERS, ids=["bert", "whitespace_split", "byte_level", "metaspace"])
def test_heads_only_where_the_pre_tokenizer_splits_at_spaces(pre: object, heads: bool) -> None:
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre
    assert head_chars(tok) is None  # truncation off: nothing cut
    tok.enable_truncation(256)
    assert (head_chars(tok) is not None) == heads
    tok.enable_truncation(256, direction="left")  # the last tokens kept: a head cannot give them
    assert head_chars(tok) is None


# (text, limit, head)
HEADS = [
    ("abc def", 10, "abc def"),  # no longer than the limit: whole
    ("abc def ghi", 8, "abc def"),  # cut before the last space within the limit
    ("abcdefgh ij", 4, "abcdefgh"),  # no space within: the first one after
    ("abcdefghij", 4, "abcdefghij"),  # no space at all: whole
    (" abcdefgh ij", 4, " abcdefgh"),  # only a leading space within: the first one after it
]


@pytest.mark.parametrize(("text", "limit", "head"), HEADS, ids=range(len(HEADS)))
def test_text_head(text: str, limit: int, head: str) -> None:
    assert text_head(text, limit) == head
