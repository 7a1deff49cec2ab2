"""``[prompt] tokenizer = "completions"``: the completions route's own tokens cut windows and prompts (issue "hosted").

The tiny organism's target behind ``calib serve`` and tests/_hosted.py's proxy: ``no_tokenize`` (a host without
``/tokenize``; its completions route answers vLLM's ``return_token_ids``), a proxy that also drops
``return_token_ids`` (ids only as ``token_id:N``: the ``echo`` way), and one that refuses ``echo`` (neither way).
The reference is the organism's own ``tokenizer.json`` read with the ``tokenizers`` library, and the server's
``/tokenize`` through the ``direct`` proxy.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from aiohttp import web

from calib.data.completion_tokenizer import CompletionTokenizer, align_tokens
from calib.servers import create_server
from calib.servers.base import ServerError
from tests._hosted import HostedProxy

#: Unicode, runs of whitespace and tabs, emoji (single, joined by ZWJ, flags), CJK, combining marks, CRLF.
TRICKY = [
    "def f(x):\n    return x  \t\t  + 1\n\n\n",
    "naïve café — “quoted” ½ ∑ λ → ∞\r\n",
    "emoji 😀😀 👩‍💻 🇫🇷 ok",
    "日本語のテキストと中文混合 e\u0301 ḁ",
    "    \n\t\n  leading and trailing   ",
    "x",
]


_Recording = HostedProxy  # it keeps every body it is sent (``bodies``, per path)


class _NoTokenIds(HostedProxy):
    """Completions asked without vLLM's ``return_token_ids`` (an older vLLM: ids only as ``token_id:N``)."""

    async def answer_async(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        own = await super().answer_async(path, body)
        if own is None and path == "/v1/completions" and body is not None and "return_token_ids" in body:
            status, answer = await self.upstream_json(path, {k: v for k, v in body.items() if k != "return_token_ids"})
            return web.json_response(answer, status=status)
        return own


class _NoEcho(_Recording):
    """Completions that refuse ``echo`` (neither way of the completions tokenizer)."""

    async def answer_async(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        own = await super().answer_async(path, body)
        if own is None and path == "/v1/completions" and body is not None and body.get("echo"):
            return web.json_response({"error": {"message": "echo is not supported", "type": "invalid_request_error"}},
                                     status=400)
        return own


class _Reshaped(_Recording):
    """Echoing completions reshaped: ``lone`` token texts without their leading spaces (as a SentencePiece model's
    lone decode), or ``no_ids``: neither of vLLM's ways of naming token ids is honoured."""

    def __init__(self, upstream: str, mode: str, shape: str) -> None:
        super().__init__(upstream, mode)
        self.shape = shape

    async def answer_async(self, path: str, body: dict[str, Any] | None) -> web.Response | None:
        own = await super().answer_async(path, body)
        if own is not None or path != "/v1/completions" or body is None:
            return own
        body = {k: v for k, v in body.items() if k not in ("return_token_ids", "return_tokens_as_token_ids")} \
            if self.shape == "no_ids" else body
        status, answer = await self.upstream_json(path, body)
        if self.shape == "lone" and body.get("echo") and status == 200:
            for choice in answer["choices"]:
                if choice.get("logprobs"):
                    choice["logprobs"]["tokens"] = [t.lstrip(" ") for t in choice["logprobs"]["tokens"]]
        return web.json_response(answer, status=status)


@pytest.fixture(scope="module")
def served(served_organism_target, tmp_path_factory):
    """The session's ``calib serve`` of the organism's target (tests/_served.py), and this module's folder."""
    return served_organism_target, tmp_path_factory.mktemp("completions-tokenizer")


async def _through(url: str, texts: list[str]) -> tuple[CompletionTokenizer, dict[str, Any]]:
    server = create_server("target", {"kind": "openai", "base_url": url, "max_retries": 0})
    try:
        tokenizer = CompletionTokenizer(server, "target")
        out = {}
        for text in texts:
            ids = await tokenizer.tokenize(text)
            out[text] = {"ids": ids, "spans": await tokenizer.token_spans(text),
                         "pieces": [await tokenizer.detokenize(ids[:k]) for k in range(len(ids) + 1)],
                         "tails": [await tokenizer.detokenize(ids[k:]) for k in range(len(ids) + 1)]}
        return tokenizer, out
    finally:
        await server.aclose()


def _reference(tokenizer_file: Path, texts: list[str]) -> dict[str, Any]:
    from tokenizers import Tokenizer

    own = Tokenizer.from_file(str(tokenizer_file))
    out = {}
    for text in texts:
        ids = own.encode(text, add_special_tokens=False).ids
        cuts = range(len(ids) + 1)
        out[text] = {"ids": ids, "pieces": [own.decode(ids[:k], skip_special_tokens=False) for k in cuts],
                     "tails": [own.decode(ids[k:], skip_special_tokens=False) for k in cuts]}
    return out


def _same_cuts(text: str, mine: dict[str, Any], own: dict[str, Any]) -> tuple[int, int]:
    """Assert the completions tokenizer cuts ``text`` as the model's own; (cuts inside a character, refused others)."""
    assert mine["ids"] == own["ids"], text
    split = refused = 0
    for k, (piece, tail) in enumerate(zip(own["pieces"], own["tails"])):
        head, rest = mine["pieces"][k], mine["tails"][k]
        marked = head.endswith("\ufffd") and rest.startswith("\ufffd")
        # either the model's own text on both sides, or a cut marked as splitting a character; never other text
        assert (head, rest) == (piece, tail) or marked, (text, k)
        assert text.startswith(head.rstrip("\ufffd")) and text.endswith(rest.lstrip("\ufffd")), (text, k)
        if not text.startswith(piece):  # the model's tokenizer splits a character here: refused
            split += 1
            assert marked and rest.lstrip("\ufffd") == tail.lstrip("\ufffd"), (text, k)
        elif marked:  # a boundary between two characters inside a run of byte tokens: refused too
            refused += 1
            assert not text[len(piece) - 1].isascii() and not text[len(piece)].isascii(), (text, k)
    # the spans rebuild the text
    assert "".join(text[a:b] for _, a, b in mine["spans"]) == text
    return split, refused


@pytest.mark.parametrize("proxy", [_Recording, _NoTokenIds], ids=["return_token_ids", "echo"])
def test_the_completions_route_tokenizes_tricky_text_as_the_model_does(served, organism_tiny, proxy):
    url, _ = served
    reference = _reference(organism_tiny.target / "tokenizer.json", TRICKY)
    with proxy(url, "no_tokenize") as host:
        tokenizer, got = asyncio.run(_through(host.url, TRICKY))
        asked = [b for b in host.bodies["/v1/completions"] if b["prompt"] in TRICKY]
    assert tokenizer.via == ("return_token_ids" if proxy is _Recording else "echo")
    split = refused = 0
    for text in TRICKY:
        one_split, one_refused = _same_cuts(text, got[text], reference[text])
        split, refused = split + one_split, refused + one_refused
    assert split > 0  # the emoji and CJK are split into byte tokens by the organism's small vocabulary
    assert refused == 0  # the token bytes place every boundary: none between two characters is refused
    # each text was asked once, echoed with logprobs 0 and nothing generated (the echo way: two answers per text)
    assert sorted(b["prompt"] for b in asked) == sorted(TRICKY * (1 if proxy is _Recording else 2))
    assert all(b["echo"] is True and b["logprobs"] == 0 and b["max_tokens"] == 0 for b in asked)
    assert all(b.get("add_special_tokens") is False for b in asked)


def test_a_text_longer_than_the_context_is_asked_in_pieces_that_agree(served, organism_tiny):
    url, _ = served
    # about 4 times the organism's context (512 tokens), with unicode and emoji lines
    text = "".join(f"def f{i}(x):\n    return x * {i}  # naïve 😀 {'日本' * (i % 3)}\n\n" for i in range(150))
    own = _reference(organism_tiny.target / "tokenizer.json", [text])[text]
    assert len(own["ids"]) > 4 * 512
    with HostedProxy(url, "no_tokenize") as host:
        tokenizer, got = asyncio.run(_through(host.url, [text]))
        pieces = [b["prompt"] for b in host.bodies["/v1/completions"]
                  if b.get("echo") and b["prompt"] in text and len(b["prompt"]) > 100]
    assert _same_cuts(text, got[text], own)[1] == 0  # every cut as the model's own, on both sides
    assert len(pieces) >= 4 and max(map(len, pieces)) <= 2 * 512  # asked in pieces of at most twice the context


@pytest.mark.parametrize("shape,message", [
    ("lone", "the completions route's echoed tokens do not rebuild the text"),
    ("no_ids", "its completions route names no token ids (neither vLLM's return_token_ids nor"),
])
def test_a_route_whose_tokens_cannot_cut_the_text_is_one_line_naming_the_remedy(served, shape, message):
    url, _ = served
    with _Reshaped(url, "no_tokenize", shape) as host:
        with pytest.raises(ServerError) as caught:
            asyncio.run(_through(host.url, ["def f(x):\n    return x + 1\n"]))
    text = str(caught.value)
    assert text.startswith("server 'target': ") and message in text and "\n" not in text
    assert text.endswith('use [prompt] tokenizer = "file" or "hub" (the model\'s tokenizer.json), "server" where the '
                         'host has /tokenize, or "chars"')


def test_token_texts_are_laid_over_the_texts_bytes():
    emoji = "😀".encode()  # F0 9F 98 80
    halves = [emoji[:2].decode("utf-8", "replace"), emoji[2:].decode("utf-8", "replace")]  # "\ufffd", "\ufffd\ufffd"
    assert align_tokens("a b", ["a", " b"]) == ([0, 1, 3], [None, None, None])
    assert align_tokens("a b", ["a", "b"]) is None  # a SentencePiece-style lone decode loses the space: refused
    # an emoji in two byte tokens: the boundary between them splits the character (resume after it, at 2)
    assert align_tokens("x😀y", ["x", *halves, "y"]) == ([0, 1, 1, 2, 3], [None, None, 2, None, None])
    assert align_tokens("x😀y", ["x", emoji[:2], emoji[2:], "y"]) == ([0, 1, 1, 2, 3], [None, None, 2, None, None])
    assert align_tokens("x😀", ["x", "\ufffd"]) is None  # one replacement cannot stand for a whole emoji
    assert align_tokens("xy", ["x", "\ufffd"]) is None
    # two emoji in byte tokens, given as bytes: the boundary between them is a character boundary
    assert align_tokens("😀😀", [emoji[:2], emoji[2:]] * 2) == ([0, 0, 1, 1, 2], [None, 1, None, 2, None])
    # as replacement texts, the middle boundary could also fall at byte 3 or 5 ("\ufffd" is 1 to 3 bytes, and
    # 80 F0 9F decodes to two of them): a boundary the layouts disagree on is refused (resume 2, not None)
    assert align_tokens("😀😀", [*halves, *halves]) == ([0, 0, 1, 1, 2], [None, 1, 2, 2, None])


# --- studies ------------------------------------------------------------------------------------------------------
def _extraction_spec(cache_dir: Path, url: str, prompt: str) -> str:
    return f"""[study]
name = "completions-tokenizer"
kind = "extraction"
seed = 0

[organism]
preset = "tiny"
cache_dir = "{cache_dir}"
extra_controls = 4

[servers.target]
kind = "openai"
base_url = "{url}/v1"
model = "organism-target"
max_retries = 0

[models]
target = "target"

[data]
source = "organism"
kinds = ["verbatim"]

[prompt]
{prompt}

[extraction]
prefix_tokens = 32
suffix_tokens = [16]
procedures = ["greedy_prefix"]
"""


def _calib(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calib", *args], cwd=root, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


@pytest.fixture(scope="module")
def extraction_runs(organism_tiny, served) -> dict[str, Any]:
    url, root = served
    cache = organism_tiny.root.parent.parent
    runs: dict[str, Any] = {"root": root}
    for name, proxy, mode, prompt in (("direct", HostedProxy, "direct", ""),
                                      ("completions", _Recording, "no_tokenize", 'tokenizer = "completions"')):
        with proxy(url, mode) as host:
            (root / f"{name}.toml").write_text(_extraction_spec(cache, host.url, prompt))
            runs[name] = _calib(root, "study", f"{name}.toml", "--run-dir", name, "--quiet")
            runs[f"{name}_requests"] = dict(host.requests)
    return runs


def _windows(run: Path) -> pl.DataFrame:
    columns = ["window_id", "sample_id", "start_token", "char_start", "char_end", "prefix", "suffix", "error"]
    return pl.read_parquet(run / "tables" / "windows.parquet").select(columns).sort("window_id")


def test_an_extraction_study_cut_by_the_completions_route_cuts_the_same_windows(extraction_runs):
    root = extraction_runs["root"]
    for name in ("direct", "completions"):
        assert extraction_runs[name].returncode == 0, extraction_runs[name].stderr
    manifest = json.loads((root / "completions" / "manifest.json").read_text())
    assert manifest["servers"]["target"]["tokenize"] is False  # the host has no tokenizer route
    assert manifest["window_tokenizer"] == {"source": "completions", "server": "target", "model": "organism-target",
                                            "via": "return_token_ids"}
    assert extraction_runs["completions_requests"].get("/tokenize", 0) <= 1  # the probe's 404
    assert "/detokenize" not in extraction_runs["completions_requests"]
    direct, hosted = _windows(root / "direct"), _windows(root / "completions")
    assert direct.filter(pl.col("error").is_null()).height >= 8
    assert hosted.equals(direct)
    # greedy_prefix counted the suffix's tokens with the same tokenizer: the same scores
    scores = [pl.read_parquet(root / n / "tables" / "scores.parquet").select("window_id", "value", "detail")
              .sort("window_id") for n in ("direct", "completions")]
    assert scores[0].height == direct.filter(pl.col("error").is_null()).height and scores[0].equals(scores[1])


def test_a_host_whose_completions_route_cannot_echo_is_refused_before_any_stage(organism_tiny, served):
    url, root = served
    cache = organism_tiny.root.parent.parent
    with _NoEcho(url, "no_tokenize") as host:
        (root / "no-echo.toml").write_text(_extraction_spec(cache, host.url, 'tokenizer = "completions"'))
        checked = _calib(root, "check", "no-echo.toml")
        studied = _calib(root, "study", "no-echo.toml", "--run-dir", "no-echo", "--quiet")
    for done in (checked, studied):
        assert done.returncode != 0
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "echo_logprobs" in line]
        assert len(errors) == 1 and "server 'target'" in errors[0], done.stdout + done.stderr
    assert not (root / "no-echo" / "tables").exists()  # nothing was started


def test_functional_prompts_cut_by_the_completions_route_are_those_of_the_servers_tokenizer(served_model, tmp_path):
    from tests.study.functional.test_tokenizer_sources import _prompts, _samples

    with HostedProxy(served_model, "direct") as host:
        direct = _prompts(tmp_path, "direct", host.url, "")
    with HostedProxy(served_model, "no_tokenize") as host:
        hosted = _prompts(tmp_path, "completions", host.url, 'tokenizer = "completions"')
    manifest = json.loads((hosted / "manifest.json").read_text())
    assert manifest["servers"]["target"]["tokenize"] is False
    assert manifest["prompt_tokenizer"] == {"source": "completions", "server": "target", "model": "tiny",
                                            "via": "return_token_ids"}
    reference = _samples(direct)
    assert reference["prompt_context_tokens"].max() <= 24  # P = 24 cut every long context
    assert (reference["prompt_context_tokens"] > 0).all() and reference["context"].str.len_chars().min() > 100
    assert _samples(hosted).equals(reference)  # prompts and counts, cell for cell


def test_the_spec_asks_echo_of_the_target_and_keys_the_cut_by_its_server_table(tmp_path):
    from calib.study.extraction.check import needs
    from calib.study.functional.check import needs as functional_needs
    from calib.study.spec import load_spec
    from calib.study.tokenizer_source import tokenizer_settings
    from tests.study.functional.test_tokenizer_sources import _spec

    (tmp_path / "e.toml").write_text(_extraction_spec(tmp_path, "http://127.0.0.1:9", 'tokenizer = "completions"'))
    spec = load_spec(tmp_path / "e.toml")
    assert needs(spec)["target"] == ["echo_logprobs", "complete"]  # no /tokenize asked
    assert tokenizer_settings(spec.prompt, spec.servers, "target") == {"tokenizer": "completions",
                                                                       "server": spec.servers["target"]}
    (tmp_path / "corpus").mkdir()
    (tmp_path / "f.toml").write_text(_spec("http://127.0.0.1:9/v1", tmp_path / "corpus", 'tokenizer = "completions"'))
    assert functional_needs(load_spec(tmp_path / "f.toml"))["target"] == ["complete", "echo_logprobs"]
