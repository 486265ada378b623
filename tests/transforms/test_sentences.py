"""Sentence splitting (transforms.sentences): per-language sanity on generated text, the
long-text chunker's invariants, and NLTK parity with Megatron-LM's splitting code, using a punkt
model trained here on generated text (nothing downloaded)."""

import os
import random
import re

import pytest
from punkt_data import megatron_language_vars, write_punkt_tab
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines import demo
from transforms import sentences as ss

sentencex = pytest.importorskip(
    "sentencex", reason="sentencex (the default splitter) is not installed: "
                        "pip install -e '.[sentences]'")

# Terminators per script, beyond the one pipelines.demo uses.
TERMINATORS = {"en": ".!?", "de": ".!?", "fr": ".!?", "ru": ".!?", "ar": ".؟!",
               "zh": "。！？", "ja": "。！？", "hi": "।?"}


def generated_sentences(rng, lang, n):
    """``n`` sentences of demo words ending in a long word (so that no sentence ends in
    something a splitter may take for an abbreviation) and a terminator of the script."""
    words = demo.WORDS[lang]
    long_words = [w for w in words if len(w) >= 4] or words
    joiner = "" if lang in ("zh", "ja") else " "
    out = []
    for _ in range(n):
        body = joiner.join(rng.choice(words) for _ in range(rng.randint(2, 12)))
        body = body + joiner + rng.choice(long_words)
        out.append(body[:1].upper() + body[1:] + rng.choice(TERMINATORS[lang]))
    return out


def join_sentences(rng, lang, sentences):
    gaps = ["", "", "\n"] if lang in ("zh", "ja") else [" ", " ", "  ", "\n"]
    text = ""
    for i, s in enumerate(sentences):
        text += s
        if i + 1 < len(sentences):
            text += "\n\n" if rng.random() < 0.15 else rng.choice(gaps)
    return text


@pytest.mark.parametrize("lang", sorted(TERMINATORS))
def test_generated_sentences_are_found_in_every_script(lang):
    rng = random.Random(lang)
    split = ss.make_splitter(lang=lang)
    keep = ss.make_splitter(lang=lang, keep_newlines=True)
    for _ in range(40):
        sents = generated_sentences(rng, lang, rng.randint(1, 15))
        text = join_sentences(rng, lang, sents)
        assert split(text) == sents
        kept = keep(text)
        assert "".join(kept) == text.rstrip()
        assert [s.strip() for s in kept] == sents


@pytest.mark.parametrize("lang,text,expected", [
    ("en", "Dr. Smith met Mr. Jones at 5 p.m. today. They talked! Did it help? Yes.",
     ["Dr. Smith met Mr. Jones at 5 p.m. today.", "They talked!", "Did it help?", "Yes."]),
    ("de", "Herr Dr. Müller kam am 3. Mai. Er blieb z. B. zwei Tage. Danach ging er.",
     ["Herr Dr. Müller kam am 3. Mai.", "Er blieb z. B. zwei Tage.", "Danach ging er."]),
    ("fr", "Il a dit « Bonjour ! » puis il est parti. Il est revenu le lendemain.",
     ["Il a dit « Bonjour ! » puis il est parti.", "Il est revenu le lendemain."]),
    ("ru", "Река несёт камни. Где люди строят дома? Вот там!",
     ["Река несёт камни.", "Где люди строят дома?", "Вот там!"]),
    ("ar", "النهر يحمل الحجارة. هل يبني الناس البيوت؟ نعم!",
     ["النهر يحمل الحجارة.", "هل يبني الناس البيوت؟", "نعم!"]),
    ("zh", "他说：“你好。我很好。”然后走了。价格是3.5元！对吗？",
     ["他说：“你好。我很好。”", "然后走了。", "价格是3.5元！", "对吗？"]),
    ("ja", "「こんにちは。元気？」と彼は言った。次の文です！",
     ["「こんにちは。元気？」", "と彼は言った。", "次の文です！"]),
])
def test_abbreviations_numbers_and_quotes(lang, text, expected):
    assert ss.make_splitter(lang=lang)(text) == expected


def test_whitespace_handling():
    text = "\n  First line\nstill first.  Second.\n\n\n  Third\tpart.  \n"
    assert ss.make_splitter()(text) == ["First line\nstill first.", "Second.", "Third\tpart."]
    kept = ss.make_splitter(keep_newlines=True)(text)
    assert kept == ["\n  First line\nstill first.  ", "Second.\n\n\n  ", "Third\tpart."]
    for split in (ss.make_splitter(), ss.make_splitter(keep_newlines=True)):
        assert split("") == [] and split(" \n\t ") == []


def test_language_names_and_codes_agree():
    text = join_sentences(random.Random(1), "de", generated_sentences(random.Random(2), "de", 30))
    by_name = ss.make_splitter(lang="german")(text)
    assert ss.make_splitter(lang="de")(text) == by_name
    assert ss.make_splitter(lang="de_DE")(text) == by_name
    assert ss.make_splitter(splitter="sentencex", lang="DE")(text) == by_name


def test_unknown_names_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="--sentence-splitter.*auto, sentencex, nltk"):
        ss.make_splitter(splitter="spacy")
    with pytest.raises(ValueError, match=r"--lang.*english.*german"):
        ss.make_splitter(lang="klingon")
    with pytest.raises(ValueError, match="only --sentence-splitter nltk"):
        ss.make_splitter(lang="/models/punkt_tab/english")
    with pytest.raises(ValueError, match="--sentence-splitter"):
        ss.check_splitter_options(splitter="moses", lang="en")
    with pytest.raises(ValueError, match="--lang"):
        ss.check_splitter_options(splitter="nltk", lang="xx")
    ss.check_splitter_options(splitter="auto", lang="ja")
    ss.check_splitter_options(splitter="nltk", lang="/some/punkt_tab/english")


# --- long text ---------------------------------------------------------------------------------

BOUNDARY = re.compile(rf"\s|[{ss._CJK_TERMINATORS}]")

# Pieces from which texts are drawn: words, terminators, quotes, CJK and every whitespace kind.
PIECES = ["word", "Dr.", "e.g.", "河流", "。", "！", "？", "「", "」", "“", "”", ".", "!", "?",
          "؟", "।", "3.5", "x" * 40, " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u3000"]
texts = st.lists(st.sampled_from(PIECES), max_size=300).map("".join)
# Mostly whitespace-free, so that the runs sentencex is slow on appear.
run_texts = st.lists(st.sampled_from(["河流在", "安静", "。", "！", "？", "「", "」", "（", "）",
                                      "ab", "?", "\n"]), max_size=1500).map("".join)


@given(texts, st.integers(1, 60))
@settings(max_examples=300, deadline=None)
def test_chunks_concatenate_to_the_text_and_respect_the_limit(text, max_chars):
    chunks = ss.chunk_long_text(text, max_chars=max_chars)
    assert "".join(chunks) == text
    assert all(chunks)
    for chunk in chunks:
        if len(chunk) > max_chars:  # allowed only when nothing in the window could be cut
            assert not BOUNDARY.search(chunk[:max_chars]), chunk


def test_chunks_end_at_paragraphs_then_sentences_then_spaces():
    para = "A sentence here. Another one follows.\n\n"
    chunks = ss.chunk_long_text(para * 100, max_chars=500)
    assert all(c.endswith("\n\n") for c in chunks[:-1]) and len(chunks) > 5
    sents = "A sentence here. Another one follows. "
    chunks = ss.chunk_long_text(sents * 100, max_chars=500)
    assert all(c.endswith("follows. ") or c.endswith("here. ") for c in chunks[:-1])
    words = "lorem ipsum dolor "
    chunks = ss.chunk_long_text(words * 100, max_chars=500)
    assert all(c.endswith(" ") and len(c) > 250 for c in chunks[:-1])
    cjk = "河流在清晨带着安静的石头。" * 100
    chunks = ss.chunk_long_text(cjk, max_chars=500)
    assert all(c.endswith("。") for c in chunks) and "".join(chunks) == cjk
    blob = "x" * 1200 + " tail"
    assert ss.chunk_long_text(blob, max_chars=500) == ["x" * 1200 + " ", "tail"]
    assert ss.chunk_long_text("", max_chars=5) == []
    with pytest.raises(ValueError):
        ss.chunk_long_text("abc", max_chars=0)


@given(run_texts)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_bounded_runs_concatenate_to_the_chunk(text):
    pieces = ss._bound_runs(text)  # called on non-empty chunks only
    assert "".join(pieces) == text and (all(pieces) or text == "")


@given(st.one_of(texts, run_texts))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_splitter_invariants(text):
    split = ss.make_splitter(lang="zh")
    sents = split(text)
    assert all(s and s == s.strip() for s in sents)
    assert "".join("".join(sents).split()) == "".join(text.split())
    kept = ss.make_splitter(lang="zh", keep_newlines=True)(text)
    assert all(kept) and "".join(kept) == text.rstrip()
    assert [s.strip() for s in kept] == sents


def test_long_documents_split_like_the_whole_text():
    rng = random.Random(5)
    for lang in ("en", "ru", "ar"):
        paragraphs = [join_sentences(rng, lang, generated_sentences(rng, lang, 20))
                      for _ in range(300)]
        text = "\n\n".join(paragraphs)
        assert len(text) > 2 * ss.MAX_CHUNK_CHARS
        whole = [s.strip() for s in sentencex.segment(lang, text) if s.strip()]
        assert ss.make_splitter(lang=lang)(text) == whole
    for lang in ("zh", "ja"):  # whitespace-free: cut inside runs, outside quotes
        sents = generated_sentences(rng, lang, 1500)
        sents[::7] = [f"「{s}{s}」" for s in sents[::7]]
        text = "".join(sents)
        assert max(len(p) for p in ss._bound_runs(text)) <= ss.MAX_RUN_CHARS
        whole = [s.strip() for s in sentencex.segment(lang, text) if s.strip()]
        assert ss.make_splitter(lang=lang)(text) == whole


# --- NLTK: Megatron-LM parity ------------------------------------------------------------------

ABBREVIATIONS = ["Dr.", "Mr.", "Mrs.", "St.", "e.g.", "i.e.", "etc.", "vs.", "No.", "Fig.",
                 "approx.", "U.S."]
WORDS = demo.WORDS["en"] + ["Smith", "Jones", "River", "Valley", "The", "A"]
SEPARATORS = [" ", " ", " ", "  ", "\n", "\n\n", " \n", "\t", "\n \n"]


def english_like_text(rng, sentences):
    """Sentences with abbreviations, initials, numbers, quotes, brackets and ellipses, joined
    by every kind of whitespace: the cases where punkt's decisions and Megatron's
    keep-newlines variables matter."""
    out = [rng.choice(["", "", "  ", "\n"])]
    for i in range(sentences):
        words = []
        for _ in range(rng.randint(2, 14)):
            r = rng.random()
            if r < 0.12:
                words.append(rng.choice(ABBREVIATIONS))
            elif r < 0.17:
                words.append(rng.choice("ABCDJKMR") + ".")
            elif r < 0.22:
                words.append(rng.choice(["3.5", "1.", "12", "2024", "(see", "it)", '"so"']))
            else:
                words.append(rng.choice(WORDS))
        text = " ".join(words)
        end = rng.choice([".", ".", ".", "!", "?", "...", '."', ".)", "?!"])
        out.append(text[:1].upper() + text[1:] + end)
        if i + 1 < sentences:
            out.append(rng.choice(SEPARATORS))
    out.append(rng.choice(["", "", " ", "\n", "\n\n "]))
    return "".join(out)


@pytest.fixture(scope="module")
def nltk_punkt():
    nltk = pytest.importorskip("nltk", reason="NLTK is not installed: pip install -e "
                                              "'.[sentences]' (needed for the parity tests)")
    from nltk.tokenize import punkt
    return nltk, punkt


@pytest.fixture(scope="module")
def punkt_data(nltk_punkt, tmp_path_factory):
    """A punkt model trained here, written as NLTK data (tokenizers/punkt_tab/english/)."""
    nltk, punkt = nltk_punkt
    rng = random.Random(11)
    training = "\n".join(english_like_text(rng, 40) for _ in range(40))
    trainer = punkt.PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train(training, finalize=True)
    params = trainer.get_params()
    assert params.abbrev_types, "the generated text should teach punkt some abbreviations"
    root = tmp_path_factory.mktemp("nltk_data")
    model_dir = root / "tokenizers" / "punkt_tab" / "english"
    model_dir.mkdir(parents=True)
    write_punkt_tab(params, model_dir)
    return {"root": str(root), "dir": str(model_dir), "params": params}


@pytest.fixture
def nltk_data_path(nltk_punkt, punkt_data, monkeypatch):
    """NLTK's data path = only our generated data (as NLTK_DATA would set it)."""
    nltk, _ = nltk_punkt
    monkeypatch.setattr(nltk.data, "path", [punkt_data["root"]])
    return punkt_data


def megatron_reference(nltk_punkt, keep_newlines):
    """Megatron-LM tools/preprocess_data.py, Encoder.initializer + Encoder.split, for one
    string (json.dumps/json.loads of the sentence list changes no string)."""
    nltk, punkt = nltk_punkt

    CustomLanguageVars = megatron_language_vars()

    splitter = nltk.load("nltk:tokenizers/punkt/english.pickle")  # what Megatron loads
    if keep_newlines:
        splitter = punkt.PunktSentenceTokenizer(train_text=splitter._params,
                                                lang_vars=CustomLanguageVars())

    def split(text):
        max_len = 1000000
        parts = [splitter.tokenize(text[i:i + max_len]) for i in range(0, len(text), max_len)]
        return [s for part in parts for s in part]
    return split


@pytest.mark.parametrize("keep_newlines", [False, True])
def test_nltk_matches_megatron_on_generated_documents(nltk_punkt, nltk_data_path, keep_newlines):
    reference = megatron_reference(nltk_punkt, keep_newlines)
    by_name = ss.make_splitter(splitter="nltk", lang="english", keep_newlines=keep_newlines)
    by_code = ss.make_splitter(splitter="nltk", lang="en", keep_newlines=keep_newlines)
    by_path = ss.make_splitter(splitter="nltk", lang=nltk_data_path["dir"],
                               keep_newlines=keep_newlines)
    rng = random.Random(3 + keep_newlines)
    differs_from_plain_split = False
    for _ in range(150):
        text = english_like_text(rng, rng.randint(1, 12))
        expected = [s for s in reference(text) if s]
        assert by_name(text) == expected
        assert by_code(text) == expected
        assert by_path(text) == expected
        differs_from_plain_split |= expected != [s.strip() for s in text.split(". ")]
    assert differs_from_plain_split


def test_keep_newlines_keeps_them_only_when_asked(nltk_data_path):
    text = "The river runs.\n\nThe valley waits.\nPeople count."
    plain = ss.make_splitter(splitter="nltk", lang="english")(text)
    kept = ss.make_splitter(splitter="nltk", lang="english", keep_newlines=True)(text)
    assert plain == ["The river runs.", "The valley waits.", "People count."]
    assert kept == ["The river runs.\n\n", "The valley waits.\n", "People count."]


@given(st.lists(st.sampled_from(ABBREVIATIONS + WORDS + [".", "!", "?", '"', ")", "(", "...",
                                                         "3.5"] + SEPARATORS), max_size=80))
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_nltk_matches_megatron_on_random_token_soup(nltk_punkt, nltk_data_path, tokens):
    text = " ".join(tokens)
    for keep in (False, True):
        expected = [s for s in megatron_reference(nltk_punkt, keep)(text) if s]
        assert ss.make_splitter(splitter="nltk", lang="english", keep_newlines=keep)(text) \
            == expected


def test_nltk_cuts_megatrons_one_million_character_windows(nltk_punkt, nltk_data_path):
    rng = random.Random(9)
    # Punkt is slow on dense sentences: a long run of words with no sentence end, then dense
    # generated sentences across the 1,000,000-character edge.
    filler = " ".join(rng.choice(WORDS) for _ in range(200_000))
    filler = filler[:ss.MEGATRON_WINDOW_CHARS - 10_000] + "."
    text = filler + " " + " ".join(english_like_text(rng, 30) for _ in range(20))
    expected = [s for s in megatron_reference(nltk_punkt, False)(text) if s]
    got = ss.make_splitter(splitter="nltk", lang="english")(text)
    assert got == expected
    whole = [s for s in punkt_tokenizer(nltk_punkt, nltk_data_path).tokenize(text) if s]
    assert got != whole  # the window changes the result, so the test can see it


def punkt_tokenizer(nltk_punkt, punkt_data):
    _, punkt = nltk_punkt
    return punkt.PunktSentenceTokenizer(punkt_data["params"])


def test_legacy_pickled_model(nltk_punkt, punkt_data, tmp_path):
    import pickle

    _, punkt = nltk_punkt
    if not hasattr(punkt, "punkt_pickle_load"):
        pytest.skip("this NLTK has no safe loader for pickled punkt models")
    path = tmp_path / "english.pickle"
    path.write_bytes(pickle.dumps(punkt.PunktSentenceTokenizer(punkt_data["params"])))
    text = english_like_text(random.Random(4), 20)
    expected = [s for s in punkt_tokenizer(nltk_punkt, punkt_data).tokenize(text) if s]
    assert ss.make_splitter(splitter="nltk", lang=str(path))(text) == expected


def test_missing_punkt_data_says_how_to_install(nltk_punkt, tmp_path, monkeypatch):
    nltk, _ = nltk_punkt
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(ss.SplitterUnavailableError,
                       match=r"punkt_tab.*never downloads.*nltk\.downloader.*NLTK_DATA"):
        ss.make_splitter(splitter="nltk", lang="english")
    assert not any(tmp_path.iterdir())  # nothing was fetched into the data path
    with pytest.raises(ss.SplitterUnavailableError, match="missing collocations.tab"):
        ss.make_splitter(splitter="nltk", lang=str(tmp_path))
    with pytest.raises(ss.SplitterUnavailableError, match="no punkt model there"):
        ss.make_splitter(splitter="nltk", lang=str(tmp_path / "nowhere" / "english"))


# --- the default: Megatron's punkt where its data is installed (choose_splitter) --------------

def test_auto_chooses_megatrons_punkt_when_its_data_is_installed(nltk_punkt, nltk_data_path):
    choice = ss.choose_splitter(splitter="auto", lang="english")
    assert choice.name == "nltk"
    assert choice.line.startswith("sentence splitter: nltk punkt, Megatron's (")
    assert nltk_data_path["dir"] in choice.line and "\n" not in choice.line
    assert ss.choose_splitter(splitter="auto", lang="en").name == "nltk"
    reference = megatron_reference(nltk_punkt, False)
    split = ss.make_splitter(splitter=choice.name, lang="english")
    text = english_like_text(random.Random(5), 12)
    assert split(text) == [s for s in reference(text) if s]


def test_auto_without_punkt_data_says_so_and_keeps_sentencex(nltk_punkt, tmp_path, monkeypatch):
    nltk, _ = nltk_punkt
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    choice = ss.choose_splitter(splitter="auto", lang="english")
    # "auto" is what a sentencex choice keeps in the settings: the resume key does not change
    assert choice.name == "auto"
    assert choice.line.startswith("sentence splitter: sentencex, not Megatron's NLTK punkt "
                                  "(no tokenizers/punkt_tab/english/ on NLTK's data path)")
    assert "nltk.downloader -d DIR punkt_tab" in choice.line and "NLTK_DATA=DIR" in choice.line
    assert "\n" not in choice.line
    assert not any(tmp_path.iterdir())  # nothing was downloaded
    text = "Dr. Smith came home. It rained. Then it stopped!"
    assert ss.make_splitter(splitter=choice.name)(text) == \
        ss.make_splitter(splitter="sentencex")(text)
    # a language punkt has no model for: sentencex, saying so
    assert "NLTK has no punkt model for --lang xx" in ss.choose_splitter(lang="xx").line


def test_explicit_splitters_are_kept(nltk_punkt, tmp_path, monkeypatch, nltk_data_path):
    assert ss.choose_splitter(splitter="sentencex").name == "sentencex"
    assert "Megatron's is --sentence-splitter nltk" in ss.choose_splitter(
        splitter="sentencex").line
    assert ss.choose_splitter(splitter="NLTK", lang="en").name == "nltk"
    # a path to a punkt model: auto runs it (the user named Megatron's model)
    assert ss.choose_splitter(splitter="auto", lang=nltk_data_path["dir"]).name == "nltk"
    with pytest.raises(ValueError, match="--sentence-splitter"):
        ss.choose_splitter(splitter="pysbd")


def test_megatrons_nltk_data_branch_cannot_load_its_pickle_on_new_nltk(nltk_punkt, punkt_data,
                                                                       tmp_path, monkeypatch):
    """What Megatron-LM core_v0.16.1 does under NLTK >= 3.9 (docs/sentences.md): with
    NLTK_DATA set it loads ``file:$NLTK_DATA/tokenizers/punkt/<lang>.pickle``, which NLTK's
    restricted unpickler refuses; without it, ``nltk:tokenizers/punkt/<lang>.pickle`` is answered
    with the punkt_tab model (megatron_reference above, the tests' reference)."""
    import pickle

    nltk, punkt = nltk_punkt
    version = tuple(int(p) for p in re.findall(r"\d+", nltk.__version__)[:2])
    if version < (3, 9):
        pytest.skip(f"NLTK {nltk.__version__} still loads pickles")
    folder = tmp_path / "tokenizers" / "punkt"
    folder.mkdir(parents=True)
    with open(folder / "english.pickle", "wb") as f:
        pickle.dump(punkt.PunktSentenceTokenizer(punkt_data["params"]), f)
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])  # NLTK_DATA=tmp_path
    with pytest.raises(pickle.UnpicklingError, match="forbidden"):
        nltk.load(f"file:{folder / 'english.pickle'}")
