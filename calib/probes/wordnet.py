"""WordNet 3.0 synonyms, offline, for the synonym-fuzzing probe.

The data are the Princeton WordNet 3.0 database files as Debian's ``wordnet-base`` package installs
them (``apt-get install wordnet-base`` puts ``index.*``, ``data.*`` and ``*.exc`` in
``/usr/share/wordnet``), or any WordNet 3.0 ``dict`` directory named by ``$CALIB_WORDNET``. They are
read with nltk's :class:`~nltk.corpus.reader.wordnet.WordNetCorpusReader`, which needs two things the
Debian files lack:

- a ``lexnames`` file (the 45 lexicographer file names, :data:`LEXNAMES`, as listed in WordNet's own
  ``lexnames(5WN)`` manual page), which calib writes itself;
- a root inside ``nltk.data.path`` that holds every file it opens as a plain file: nltk >= 3.9 refuses
  a path outside ``nltk.data.path``, a symbolic link pointing out of the root and a hard-linked file
  (``st_nlink`` > 1). So calib builds a private directory under its cache folder (``$CALIB_CACHE_DIR``,
  else ``$XDG_CACHE_HOME/calib``, else ``~/.cache/calib``) with copies of the database files (about
  28 MB, once per WordNet installation) and the generated ``lexnames``, and appends it to
  ``nltk.data.path``.

A directory that already has a ``lexnames`` file (e.g. nltk's own ``wordnet`` corpus unpacked) is read
in place. Nothing here reaches the network.

References
----------
G. A. Miller (1995). WordNet: a lexical database for English. *Communications of the ACM*
38(11):39–41. C. Fellbaum (ed.) (1998). *WordNet: An Electronic Lexical Database*. MIT Press.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from calib._exceptions import CalibError, InvalidParameterError

__all__ = [
    "DEFAULT_WORDNET",
    "LEXNAMES",
    "POS",
    "WordNetUnavailable",
    "lexnames_text",
    "synonyms",
    "wordnet_dir",
    "wordnet_reader",
]

#: Where Debian's ``wordnet-base`` installs the database; ``$CALIB_WORDNET`` overrides it.
DEFAULT_WORDNET = Path("/usr/share/wordnet")

#: WordNet 3.0's 45 lexicographer files, numbered 00–44 by position (``lexnames(5WN)``).
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling",
    "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object", "noun.person",
    "noun.phenomenon", "noun.plant", "noun.possession", "noun.process", "noun.quantity", "noun.relation",
    "noun.shape", "noun.state", "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition",
    "verb.communication", "verb.competition", "verb.consumption", "verb.contact", "verb.creation",
    "verb.emotion", "verb.motion", "verb.perception", "verb.possession", "verb.social", "verb.stative",
    "verb.weather", "adj.ppl",
)

#: Part-of-speech codes :func:`synonyms` accepts (nltk's): noun, verb, adjective, adverb, satellite adjective.
POS = ("n", "v", "a", "r", "s")

# lexnames(5WN): the third column is the syntactic category, 1 noun, 2 verb, 3 adjective, 4 adverb.
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_REQUIRED = tuple(f"{kind}.{suffix}" for kind in ("index", "data") for suffix in ("adj", "adv", "noun", "verb"))
_OPTIONAL = ("adj.exc", "adv.exc", "noun.exc", "verb.exc", "cntlist.rev", "index.sense")
_INSTALL = "apt-get install wordnet-base, or set CALIB_WORDNET to a WordNet 3.0 dict directory"


class WordNetUnavailable(CalibError, FileNotFoundError):
    """The WordNet database files are not where calib looks for them (the message says how to install them)."""


def lexnames_text() -> str:
    """The ``lexnames`` file of WordNet 3.0: ``NN<TAB>name<TAB>category`` per line, as nltk's reader parses it."""
    return "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def wordnet_dir() -> Path:
    """The WordNet database directory: ``$CALIB_WORDNET`` when set, else :data:`DEFAULT_WORDNET`.

    Raises
    ------
    WordNetUnavailable
        When the directory lacks one of the ``index.*`` / ``data.*`` files (one line, with the fix).
    """
    source = Path(os.environ.get("CALIB_WORDNET") or DEFAULT_WORDNET)
    missing = [name for name in _REQUIRED if not (source / name).is_file()]
    if missing:
        raise WordNetUnavailable(f"WordNet data not found at {source} (no {missing[0]}): {_INSTALL}")
    return source.resolve()


def wordnet_reader() -> Any:
    """nltk's WordNet reader over :func:`wordnet_dir`, built once per directory and process.

    Returns
    -------
    nltk.corpus.reader.wordnet.WordNetCorpusReader
        Without the multilingual (OMW) data.

    Raises
    ------
    WordNetUnavailable
        When the database files are missing (see :func:`wordnet_dir`).
    """
    return _reader(str(wordnet_dir()))


def synonyms(word: str, pos: str | None = None) -> list[str]:
    """WordNet synonyms of ``word``: the lemma names of every synset the word belongs to.

    The word is looked up as nltk does (case-insensitively, through WordNet's morphological
    exceptions and suffix rules, so "lists" finds the synsets of "list"; spaces stand for WordNet's
    underscores, so "find out" is a phrase lookup). Synsets come in WordNet's sense order (most frequent
    sense first, nouns before verbs, adjectives, adverbs), lemmas in synset order.

    Parameters
    ----------
    word
        The word (or phrase) to look up.
    pos
        Restrict to one part of speech, one of :data:`POS` (``"n"``, ``"v"``, ``"a"``, ``"r"``, ``"s"``);
        ``None`` (default) for all.

    Returns
    -------
    list of str
        Lemma names with underscores turned into spaces, de-duplicated case-insensitively (first
        spelling kept), excluding the word itself and its base forms (case-insensitively): the
        synonyms of "lists" do not include "list". Empty when WordNet does not know the word.

    Raises
    ------
    InvalidParameterError
        For a ``pos`` outside :data:`POS`.
    WordNetUnavailable
        When the database files are missing (see :func:`wordnet_dir`).
    """
    if pos is not None and pos not in POS:
        raise InvalidParameterError(f"pos={pos!r} is not a WordNet part of speech; use one of {', '.join(POS)} "
                                    "or None for all")
    if not isinstance(word, str):
        raise InvalidParameterError(f"word must be a string, got {type(word).__name__}")
    key = " ".join(word.split()).lower()
    if not key:
        return []
    return list(_synonyms(str(wordnet_dir()), key, pos))


@lru_cache(maxsize=65536)
def _synonyms(source: str, word: str, pos: str | None) -> tuple[str, ...]:
    wn = _reader(source)
    query = word.replace(" ", "_")
    own = {word}
    for part in (pos,) if pos else ("n", "v", "a", "r"):
        base = wn.morphy(query, part)
        if base:
            own.add(base.replace("_", " ").lower())
    seen: dict[str, str] = {}
    for synset in wn.synsets(query, pos=pos):
        for name in synset.lemma_names():
            lemma = name.replace("_", " ")
            folded = lemma.lower()
            if folded not in own and folded not in seen:
                seen[folded] = lemma
    return tuple(seen.values())


@lru_cache(maxsize=4)
def _reader(source: str) -> Any:
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    root = Path(source) if (Path(source) / "lexnames").is_file() else _private_root(Path(source))
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))
    class EnglishWordNet(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet") -> None:
            # nltk (3.10) maps every WordNet but its own to nltk's "wordnet" corpus for the multilingual
            # data, reading that corpus's index.sense; calib reads English WordNet 3.0 only and skips it.
            return None

    with warnings.catch_warnings():
        # Without the OMW corpus nltk warns that the multilingual functions are off; calib needs English only.
        warnings.filterwarnings("ignore", message="The multilingual functions")
        return EnglishWordNet(str(root), None)


def _cache_root() -> Path:
    # The same rule as calib.organism.build.cache_root, kept here so probes do not import the organism.
    if os.environ.get("CALIB_CACHE_DIR"):
        return Path(os.environ["CALIB_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "calib"


def _private_root(source: Path) -> Path:
    """A directory with copies of the source's files and a generated ``lexnames``.

    Keyed by the source path and each file's size and modification time, so an upgraded package gets a
    fresh directory; built in a temporary directory and renamed into place, so a concurrent build or an
    interrupted one never leaves a half-filled root behind.
    """
    names = [name for name in (*_REQUIRED, *_OPTIONAL) if (source / name).is_file()]
    stamp = [str(source)] + [f"{n}:{(source / n).stat().st_size}:{(source / n).stat().st_mtime_ns}" for n in names]
    key = hashlib.sha256("\n".join(stamp).encode()).hexdigest()[:16]
    parent = _cache_root() / "wordnet"
    final = parent / key
    if (final / "lexnames").is_file():
        return final
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=parent))
    try:
        for name in names:
            shutil.copyfile(source / name, staging / name)
        (staging / "lexnames").write_text(lexnames_text(), encoding="utf-8")
        try:
            staging.rename(final)
        except OSError:
            if not (final / "lexnames").is_file():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final
