"""The embedded server: in-process kind, `calib serve` over HTTP (openai SDK, text-generation client), both
checked against transformers run directly here, and against each other.

Reference values come from an independent computation: the model loaded with
``AutoModelForCausalLM.from_pretrained`` and run by hand in this file (full forward passes, no KV cache),
``torch.log_softmax`` and ``torch.logsumexp``.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import math
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the embedded server needs the 'embedded' extra: pip install -e '.[embedded]'")
pytest.importorskip("transformers", reason="the embedded server needs the 'embedded' extra")

import aiohttp
import openai
import text_generation
import torch
import transformers

from calib._exceptions import InputError, InvalidParameterError
from calib.servers.base import (
    CapabilityError,
    ChatMessage,
    ChatParams,
    Chatting,
    Embedding,
    RequestFailed,
    SamplingParams,
    Scoring,
    Server,
    Tokenizing,
    Tool,
)
from calib.servers.embedded import check_model_dir
from calib.servers.embedded.kind import EmbeddedServer
from calib.servers.registry import create_server
from tests._served import SERVED_NAME, calib_command
from tests._tiny import build_tiny_model

PROMPTS = ["def parse(self, s):\n    ", "import json\n\nclass Encoder", "    return '\\n'.join(lines)"]
# A boundary the tokenizer does not merge across, so the joint and the separate tokenizations agree
# (the TGI route only takes text).
SCORE_PROMPT, SCORE_CONTINUATION = "def f(x):", " return x + 1"
MAX = 24
# The text-generation client (0.7) still calls pydantic's deprecated .dict().
pytestmark = pytest.mark.filterwarnings("ignore:The `dict` method is deprecated:DeprecationWarning")
TOL_EXACT = 1e-5  # same weights, same arithmetic: the in-process kind against transformers
TOL_CROSS = 1e-4  # across routes (KV cache against full forward passes, JSON round trips)


def run(coro):
    return asyncio.run(coro)


# -- fixtures and the independent reference ---------------------------------------------------------

@pytest.fixture(scope="module")
def ref(tiny_model_dir: Path):
    """The model and tokenizer loaded directly with transformers."""
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model, transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def kind(tiny_model_dir: Path):
    server = create_server("tiny", {"kind": "embedded", "model_dir": str(tiny_model_dir), "threads": 1})
    yield server
    run(server.aclose())


@torch.inference_mode()
def ref_logits(ref, ids: Sequence[int]) -> torch.Tensor:
    return ref[0](torch.tensor([list(ids)])).logits[0]


@torch.inference_mode()
def manual_greedy(ref, ids: Sequence[int], n: int) -> tuple[list[int], list[float]]:
    """Argmax decoding by hand: a full forward pass per step, no cache; log-probs at temperature 1."""
    ids, out, lps = list(ids), [], []
    for _ in range(n):
        logits = ref_logits(ref, ids + out)[-1]
        token = int(torch.argmax(logits))
        out.append(token)
        lps.append(float(torch.log_softmax(logits, -1)[token]))
        if token == ref[1].eos_token_id:
            break
    return out, lps


def ref_prompt_logprobs(ref, ids: Sequence[int]) -> list[float]:
    lp = torch.log_softmax(ref_logits(ref, ids), -1)
    return [float(lp[i - 1, ids[i]]) for i in range(1, len(ids))]


def ascii_stop(text: str) -> str:
    """A two-character ASCII piece of ``text`` past its start (generated text holds U+FFFD too)."""
    for i in range(2, len(text) - 1):
        piece = text[i:i + 2]
        if piece.isascii() and piece.isprintable():
            return piece
    raise AssertionError(f"no ASCII piece in {text!r}")


def completions_client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0)


# -- the tiny model -----------------------------------------------------------------------------------

def test_tiny_model_is_deterministic_given_its_seed(tiny_model_dir: Path, tmp_path: Path):
    again = build_tiny_model(tmp_path / "again")
    other = build_tiny_model(tmp_path / "other", seed=1)
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "config.json"):
        assert (again / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    assert (other / "model.safetensors").read_bytes() != (again / "model.safetensors").read_bytes()


def test_tiny_model_loads_offline_with_a_chat_template(ref):
    model, tok = ref
    assert model.config.vocab_size == len(tok) == 384
    assert tok.eos_token == "<|endoftext|>" and tok.eos_token_id is not None
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt == "<|user|>\nhi\n<|assistant|>\n"


# -- the in-process kind against transformers --------------------------------------------------------

def test_kind_registers_and_reports_its_capabilities(kind, tiny_model_dir):
    assert isinstance(kind, EmbeddedServer)
    for protocol in (Server, Scoring, Tokenizing, Chatting, Embedding):
        assert isinstance(kind, protocol), protocol.__name__
    caps = run(kind.capabilities())
    assert (caps.kind, caps.name, caps.max_context, caps.max_top_logprobs) == ("embedded", "tiny", 512, 384)
    assert caps.batch_prompts and caps.echo_logprobs and caps.prompt_logprobs and caps.token_ids_in
    assert caps.full_distribution and caps.tokenize and caps.chat and caps.embeddings and not caps.tools
    assert caps.server_version


def test_kind_provenance_names_the_dtype_the_weights_hash_and_the_version(kind, tiny_model_dir, served_model):
    run(kind.capabilities())
    record = kind.provenance()
    weights = hashlib.sha256((tiny_model_dir / "model.safetensors").read_bytes()).hexdigest()

    async def info():
        async with aiohttp.ClientSession(served_model) as s, s.get("/info") as r:
            return await r.json()

    # The weights are loaded as float32 (docs/servers.md); TGI's /info of calib serve says the same.
    assert record["dtype"] == "float32" and run(info())["model_dtype"] == "torch.float32"
    assert (record["kind"], record["model"], record["device"]) == ("embedded", str(tiny_model_dir), "cpu")
    assert record["weights_sha256"] == {"model.safetensors": weights}
    assert record["server_version"] == importlib.metadata.version("calib")
    assert record["revision"] is None and "no hub revision" in record["missing"]["revision"]
    assert set(record["missing"]) == {"revision"}


def test_kind_provenance_reads_the_commit_of_a_hub_cache_snapshot(tiny_model_dir, tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "models--org--tiny" / "snapshots" / commit
    shutil.copytree(tiny_model_dir, snapshot)
    server = create_server("snap", {"kind": "embedded", "model_dir": str(snapshot), "threads": 1})
    try:
        before = server.provenance()
        run(server.capabilities())
        record = server.provenance()
    finally:
        run(server.aclose())
    assert before["dtype"] is None and before["missing"]["dtype"] == "the server was not probed in this run"
    assert record["revision"] == commit
    assert record["sources"]["revision"] == "model_dir is a Hugging Face cache snapshot"


def test_kind_config_errors_name_the_server_and_the_key(tmp_path):
    with pytest.raises(InvalidParameterError, match="'t'.*model_dir"):
        create_server("t", {"kind": "embedded"})
    with pytest.raises(InputError, match="does not exist"):
        create_server("t", {"kind": "embedded", "model_dir": str(tmp_path / "nope")})
    with pytest.raises(InvalidParameterError, match="threads"):
        create_server("t", {"kind": "embedded", "model_dir": str(tmp_path), "threads": 0})
    with pytest.raises(InputError, match="config.json.*weights.*tokenizer"):
        check_model_dir(tmp_path)


def test_greedy_equals_a_manual_argmax_loop(kind, ref):
    completions = run(kind.complete(PROMPTS, SamplingParams(max_tokens=MAX, logprobs=0)))
    for prompt, (c,) in zip(PROMPTS, completions):
        ids, lps = manual_greedy(ref, ref[1].encode(prompt), MAX)
        assert [t.token_id for t in c.tokens] == ids
        assert c.text == ref[1].decode(ids, skip_special_tokens=True)
        assert c.finish_reason == ("stop" if ref[1].eos_token_id in ids else "length")
        assert [t.logprob for t in c.tokens] == pytest.approx(lps, abs=TOL_EXACT)
        assert all(t.rank == 1 for t in c.tokens)


def test_score_equals_log_softmax_of_a_manual_forward_pass(kind, ref):
    prompt, continuation = "def parse(self, s):", "\n    return json.loads(s)\n"
    temperatures = (0.5, 1.0, 2.0)
    sc = run(kind.score(prompt, continuation, top_logprobs=3, temperatures=temperatures))
    p_ids, c_ids = ref[1].encode(prompt), ref[1].encode(continuation)
    # Tokenized separately and concatenated: the boundary is where the caller put it.
    assert (list(sc.prompt_token_ids), list(sc.continuation_token_ids)) == (p_ids, c_ids)
    logits = ref_logits(ref, p_ids + c_ids)[len(p_ids) - 1:-1]
    lp = torch.log_softmax(logits, -1)
    for j, (tok, entry) in enumerate(zip(c_ids, sc.tokens)):
        assert entry.token_id == tok
        assert entry.logprob == pytest.approx(float(lp[j, tok]), abs=TOL_EXACT)
        assert entry.rank == 1 + int((lp[j] > lp[j, tok]).sum())
        assert [i for i, _, _ in entry.top] == torch.topk(lp[j], 3).indices.tolist()
    for t in temperatures:
        # log p_T(x) = logits[x]/T - logsumexp over the whole vocabulary of logits/T
        expected = [float(logits[j, tok] / t - torch.logsumexp(logits[j] / t, -1)) for j, tok in enumerate(c_ids)]
        assert list(sc.temperature_logprobs[t]) == pytest.approx(expected, abs=TOL_EXACT)
    assert list(sc.temperature_logprobs[1.0]) == pytest.approx([e.logprob for e in sc.tokens], abs=1e-6)
    assert sc.temperature_logprobs[0.5] != pytest.approx(sc.temperature_logprobs[2.0], abs=1e-3)


def test_stop_sequences_end_the_text_before_them(kind):
    (greedy,), = run(kind.complete(PROMPTS[:1], SamplingParams(max_tokens=MAX)))
    stop = ascii_stop(greedy.text)
    (c,), = run(kind.complete(PROMPTS[:1], SamplingParams(max_tokens=MAX, stop=("never seen", stop))))
    assert (c.text, c.finish_reason) == (greedy.text[:greedy.text.index(stop)], "stop")
    (c,), = run(kind.complete(PROMPTS[:1], SamplingParams(max_tokens=MAX, stop=("never seen",))))
    assert (c.text, c.finish_reason) == (greedy.text, "length")


def test_sampling_with_a_seed_is_reproducible(kind, ref):
    params = SamplingParams(max_tokens=MAX, temperature=1.0, seed=7, n=2, logprobs=0)
    first = run(kind.complete(PROMPTS[:1], params))[0]
    again = run(kind.complete(PROMPTS[:1], params))[0]
    other = run(kind.complete(PROMPTS[:1], SamplingParams(max_tokens=MAX, temperature=1.0, seed=8, logprobs=0)))[0]
    ids = [[t.token_id for t in c.tokens] for c in first]
    assert ids == [[t.token_id for t in c.tokens] for c in again]
    assert ids[0] != ids[1] and ids[0] != [t.token_id for t in other[0].tokens]
    # The log-probs of a sampled path are the base policy's (temperature 1), as teacher forcing gives them.
    p_ids = ref[1].encode(PROMPTS[0])
    assert [t.logprob for t in first[0].tokens] == pytest.approx(
        ref_prompt_logprobs(ref, p_ids + ids[0])[len(p_ids) - 1:], abs=TOL_EXACT)
    # top_k=1 and a tiny top_p leave only the argmax: sampling then equals greedy decoding.
    greedy = manual_greedy(ref, p_ids, MAX)[0]
    for narrow in (SamplingParams(max_tokens=MAX, temperature=1.0, top_k=1, seed=3, logprobs=0),
                   SamplingParams(max_tokens=MAX, temperature=1.0, top_p=1e-6, seed=3, logprobs=0)):
        assert [t.token_id for t in run(kind.complete(PROMPTS[:1], narrow))[0][0].tokens] == greedy


def test_tokenize_embed_and_chat_in_process(kind, ref):
    model, tok = ref
    text = PROMPTS[2]
    assert run(kind.tokenize(text)) == tok.encode(text)
    assert run(kind.detokenize(tok.encode(text))) == text
    vectors = run(kind.embed(["a", text]))
    with torch.inference_mode():
        hidden = model(torch.tensor([tok.encode(text)]), output_hidden_states=True).hidden_states[-1][0].mean(0)
    assert vectors[1] == pytest.approx(torch.nn.functional.normalize(hidden, dim=0).tolist(), abs=TOL_EXACT)
    assert math.fsum(v * v for v in vectors[0]) == pytest.approx(1.0)
    reply = run(kind.chat([ChatMessage("user", "hello")], params=ChatParams(max_tokens=8)))
    ids = tok.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=True)
    assert reply.content == tok.decode(manual_greedy(ref, ids, 8)[0], skip_special_tokens=True)
    assert (reply.input_tokens, reply.output_tokens) == (len(ids), 8)
    with pytest.raises(CapabilityError, match="tools"):
        run(kind.chat([ChatMessage("user", "hi")], tools=[Tool("f", "a tool", {"type": "object"})]))


def test_over_long_requests_fail_clearly(kind):
    with pytest.raises(InvalidParameterError, match="maximum context length is 512 tokens"):
        run(kind.complete(["x = 1\n" * 200], SamplingParams(max_tokens=MAX)))
    with pytest.raises(InvalidParameterError, match="maximum context length"):
        run(kind.score("x = 1\n" * 200, "y"))
    # an embedding of an over-long text fails its request, as an HTTP server's 400 would: an embedding metric
    # then records that pair's reason instead of stopping the study
    with pytest.raises(RequestFailed, match="maximum context length is 512 tokens") as failed:
        run(kind.embed(["a", "x = 1\n" * 200]))
    assert failed.value.status == 400 and failed.value.route == "embed"
    from calib.metrics.base import Pair
    from calib.metrics.embedding import EmbeddingMetric

    scores = run(EmbeddingMetric(server=kind, batch_size=1).ascore_batch(
        [Pair("def f(x):\n    return x\n", "def f(y):\n    return y\n", "python"),
         Pair("x = 1\n" * 200, "y = 2\n", "python")]))
    assert scores[0].value is not None and scores[1].value is None
    assert "maximum context length" in scores[1].reason


# -- over HTTP: the real openai SDK --------------------------------------------------------------------

def test_openai_completions_take_lists_of_prompts_and_token_ids(served_model, kind):
    expected = run(kind.complete(PROMPTS, SamplingParams(max_tokens=MAX, logprobs=2)))
    ids = [run(kind.tokenize(p)) for p in PROMPTS]

    async def go():
        async with completions_client(served_model) as client:
            by_text = await client.completions.create(model=SERVED_NAME, prompt=PROMPTS, max_tokens=MAX,
                                                      temperature=0, logprobs=2)
            by_ids = await client.completions.create(model=SERVED_NAME, prompt=ids, max_tokens=MAX, temperature=0,
                                                     extra_body={"return_token_ids": True})
            return by_text, by_ids

    by_text, by_ids = run(go())
    assert [c.index for c in by_text.choices] == [0, 1, 2]
    assert by_text.usage.prompt_tokens == sum(map(len, ids)) and by_text.usage.completion_tokens == 3 * MAX
    for (want,), got, got_ids, p_ids in zip(expected, by_text.choices, by_ids.choices, ids):
        assert got.text == got_ids.text == want.text
        assert got.finish_reason == want.finish_reason
        assert got_ids.model_extra["token_ids"] == [t.token_id for t in want.tokens]
        assert got_ids.model_extra["prompt_token_ids"] == p_ids
        assert got.logprobs.token_logprobs == pytest.approx([t.logprob for t in want.tokens], abs=TOL_CROSS)
        assert got.logprobs.text_offset[0] == 0
        for token, top in zip(got.logprobs.tokens, got.logprobs.top_logprobs):
            assert token in top and 1 <= len(top) <= 3


def test_openai_echo_with_max_tokens_0_scores_the_prompt(served_model, ref):
    text = PROMPTS[0]
    ids = ref[1].encode(text)

    async def go():
        async with completions_client(served_model) as client:
            return await client.completions.create(model=SERVED_NAME, prompt=text, max_tokens=0, echo=True,
                                                   logprobs=1, temperature=0)

    (choice,) = run(go()).choices
    assert choice.text == text and choice.finish_reason == "length"
    lp = choice.logprobs
    assert "".join(lp.tokens) == text and len(lp.tokens) == len(ids)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert lp.token_logprobs[1:] == pytest.approx(ref_prompt_logprobs(ref, ids), abs=TOL_CROSS)
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]


def test_openai_prompt_logprobs_extension(served_model, ref):
    text = PROMPTS[1]
    ids = ref[1].encode(text)

    async def go():
        async with completions_client(served_model) as client:
            return await client.completions.create(model=SERVED_NAME, prompt=text, max_tokens=1, temperature=0,
                                                   extra_body={"prompt_logprobs": 2})

    plp = run(go()).choices[0].model_extra["prompt_logprobs"]
    lp = torch.log_softmax(ref_logits(ref, ids), -1)
    assert plp[0] is None and len(plp) == len(ids)
    for i in range(1, len(ids)):
        entry = plp[i]
        assert 2 <= len(entry) <= 3
        mine = entry[str(ids[i])]
        assert mine["logprob"] == pytest.approx(float(lp[i - 1, ids[i]]), abs=TOL_CROSS)
        assert mine["rank"] == 1 + int((lp[i - 1] > lp[i - 1, ids[i]]).sum())
        assert mine["decoded_token"] == ref[1].decode([ids[i]])
        best = int(torch.argmax(lp[i - 1]))
        assert entry[str(best)]["rank"] == 1


def test_openai_chat_and_embeddings(served_model, kind):
    want = run(kind.chat([ChatMessage("user", "hello")], params=ChatParams(max_tokens=8)))
    vectors = run(kind.embed(["a", PROMPTS[2]]))

    async def go():
        async with completions_client(served_model) as client:
            chat = await client.chat.completions.create(model=SERVED_NAME, messages=[{"role": "user",
                                                                                      "content": "hello"}],
                                                        max_tokens=8, temperature=0, logprobs=True, top_logprobs=2)
            b64 = await client.embeddings.create(model=SERVED_NAME, input=["a", PROMPTS[2]])
            floats = await client.embeddings.create(model=SERVED_NAME, input=["a", PROMPTS[2]], encoding_format="float")
            return chat, b64, floats

    chat, b64, floats = run(go())
    choice = chat.choices[0]
    assert choice.message.content == want.content and choice.message.role == "assistant"
    assert chat.usage.prompt_tokens == want.input_tokens and chat.usage.completion_tokens == want.output_tokens
    assert len(choice.logprobs.content) == 8 and all(len(c.top_logprobs) == 2 for c in choice.logprobs.content)
    for response in (b64, floats):
        assert [d.embedding for d in response.data] == [pytest.approx(v, abs=TOL_EXACT) for v in vectors]


def test_vllm_tokenize_detokenize_and_info_routes(served_model, ref):
    tok = ref[1]
    text = PROMPTS[0]

    async def go():
        async with aiohttp.ClientSession(served_model) as s:
            out = {}
            for key, path, body in [("tok", "/tokenize", {"prompt": text, "return_token_strs": True}),
                                    ("chat", "/tokenize", {"messages": [{"role": "user", "content": "hi"}]}),
                                    ("detok", "/detokenize", {"tokens": tok.encode(text)})]:
                async with s.post(path, json=body) as r:
                    assert r.status == 200, await r.text()
                    out[key] = await r.json()
            for path in ("/v1/models", "/version", "/health"):
                async with s.get(path) as r:
                    assert r.status == 200
                    out[path] = await r.json() if path != "/health" else None
            return out

    out = run(go())
    assert out["tok"] == {"count": len(tok.encode(text)), "max_model_len": 512, "tokens": tok.encode(text),
                          "token_strs": tok.convert_ids_to_tokens(tok.encode(text))}
    assert out["chat"]["tokens"] == tok.encode("<|user|>\nhi\n<|assistant|>\n")
    assert out["detok"] == {"prompt": text}
    assert out["/v1/models"]["data"][0]["id"] == SERVED_NAME
    assert out["/v1/models"]["data"][0]["max_model_len"] == 512
    assert out["/version"]["version"]


# -- over HTTP: the real text-generation (TGI) client --------------------------------------------------

def test_tgi_generate_with_details_prefill_and_top_tokens(served_model, kind, ref):
    (want,), = run(kind.complete(PROMPTS[:1], SamplingParams(max_tokens=MAX, logprobs=0)))
    ids = ref[1].encode(PROMPTS[0])
    r = run(text_generation.AsyncClient(served_model).generate(PROMPTS[0], max_new_tokens=MAX,
                                                               decoder_input_details=True, top_n_tokens=3))
    d = r.details
    assert r.generated_text == want.text
    assert (d.finish_reason.value, d.generated_tokens, d.seed) == ("length", MAX, None)
    assert [t.id for t in d.tokens] == [t.token_id for t in want.tokens]
    assert [t.logprob for t in d.tokens] == pytest.approx([t.logprob for t in want.tokens], abs=TOL_CROSS)
    assert [p.id for p in d.prefill] == ids and d.prefill[0].logprob is None
    assert [p.logprob for p in d.prefill[1:]] == pytest.approx(ref_prompt_logprobs(ref, ids), abs=TOL_CROSS)
    assert all(len(top) == 3 and top[0].id == t.id for top, t in zip(d.top_tokens, d.tokens))


def test_tgi_sampling_with_a_seed_matches_in_process_and_openai(served_model, kind):
    (want,), = run(kind.complete(PROMPTS[:1], SamplingParams(max_tokens=MAX, temperature=0.8, seed=5)))

    async def go():
        tgi = text_generation.AsyncClient(served_model)
        a = await tgi.generate(PROMPTS[0], max_new_tokens=MAX, do_sample=True, temperature=0.8, seed=5)
        b = await tgi.generate(PROMPTS[0], max_new_tokens=MAX, do_sample=True, temperature=0.8, seed=5)
        async with completions_client(served_model) as client:
            c = await client.completions.create(model=SERVED_NAME, prompt=PROMPTS[0], max_tokens=MAX,
                                                temperature=0.8, seed=5)
        return a, b, c

    a, b, c = run(go())
    assert a.generated_text == b.generated_text == c.choices[0].text == want.text
    assert a.details.seed == 5


def test_tgi_tokenize_info_and_stop_sequences(served_model, kind):
    text = PROMPTS[2]
    ids = run(kind.tokenize(text))
    (greedy,), = run(kind.complete([text], SamplingParams(max_tokens=MAX)))
    stop = ascii_stop(greedy.text)

    async def go():
        async with aiohttp.ClientSession(served_model) as s:
            async with s.post("/tokenize", json={"inputs": text}) as r:
                tokens = await r.json()
            async with s.get("/info") as r:
                info = await r.json()
            async with s.post("/generate", json={"inputs": text, "parameters": {
                    "max_new_tokens": MAX, "stop": [stop], "details": True, "return_full_text": True}}) as r:
                generated = await r.json()
            return tokens, info, generated

    tokens, info, generated = run(go())
    assert [t["id"] for t in tokens] == ids
    assert "".join(t["text"] for t in tokens) == text
    assert all(text[t["start"]:t["stop"]] == t["text"] for t in tokens)
    assert (info["model_id"], info["max_total_tokens"], info["max_input_tokens"]) == (SERVED_NAME, 512, 511)
    # TGI keeps the stop sequence in generated_text; the OpenAI route cuts before it.
    assert generated["details"]["finish_reason"] == "stop_sequence"
    cut = greedy.text.index(stop)
    assert generated["generated_text"].startswith(text + greedy.text[:cut + len(stop)])


# -- the three routes agree -----------------------------------------------------------------------------

def test_cross_check_generation_and_scoring_agree_across_routes(served_model, kind, ref):
    """Same greedy text and the same log-probs (within 1e-4) in-process, via OpenAI and via TGI."""
    inproc = run(kind.complete(PROMPTS, SamplingParams(max_tokens=MAX, logprobs=0)))
    scored = run(kind.score(SCORE_PROMPT, SCORE_CONTINUATION))
    p_ids, c_ids = list(scored.prompt_token_ids), list(scored.continuation_token_ids)
    assert ref[1].encode(SCORE_PROMPT + SCORE_CONTINUATION) == p_ids + c_ids

    async def go():
        async with completions_client(served_model) as client:
            oa = await client.completions.create(model=SERVED_NAME, prompt=PROMPTS, max_tokens=MAX, temperature=0,
                                                 logprobs=0)
            echo = await client.completions.create(model=SERVED_NAME, prompt=p_ids + c_ids, max_tokens=0, echo=True,
                                                   logprobs=0, temperature=0)
            plp = await client.completions.create(model=SERVED_NAME, prompt=p_ids + c_ids, max_tokens=1,
                                                  temperature=0, extra_body={"prompt_logprobs": 0})
        tgi = text_generation.AsyncClient(served_model)
        tg = [await tgi.generate(p, max_new_tokens=MAX) for p in PROMPTS]
        prefill = await tgi.generate(SCORE_PROMPT + SCORE_CONTINUATION, max_new_tokens=1, decoder_input_details=True)
        return oa, echo, plp, tg, prefill

    oa, echo, plp, tg, prefill = run(go())
    for (want,), o, t in zip(inproc, oa.choices, tg):
        assert want.text == o.text == t.generated_text
        lps = [x.logprob for x in want.tokens]
        assert o.logprobs.token_logprobs == pytest.approx(lps, abs=TOL_CROSS)
        assert [x.logprob for x in t.details.tokens] == pytest.approx(lps, abs=TOL_CROSS)
    n = len(p_ids)
    want = [e.logprob for e in scored.tokens]
    assert echo.choices[0].logprobs.token_logprobs[n:] == pytest.approx(want, abs=TOL_CROSS)
    entries = plp.choices[0].model_extra["prompt_logprobs"][n:]
    assert [e[str(i)]["logprob"] for e, i in zip(entries, c_ids)] == pytest.approx(want, abs=TOL_CROSS)
    assert [p.logprob for p in prefill.details.prefill[n:]] == pytest.approx(want, abs=TOL_CROSS)


# -- bad requests ------------------------------------------------------------------------------------------

def test_bad_requests_get_400_with_a_message(served_model):
    async def go():
        async with completions_client(served_model) as client:
            with pytest.raises(openai.BadRequestError, match="maximum context length is 512"):
                await client.completions.create(model=SERVED_NAME, prompt="x", max_tokens=10_000)
            with pytest.raises(openai.BadRequestError, match="tool calling is not supported"):
                await client.chat.completions.create(model=SERVED_NAME, messages=[{"role": "user", "content": "x"}],
                                                     tools=[{"type": "function", "function": {"name": "f"}}])
            with pytest.raises(openai.NotFoundError, match="does not exist"):
                await client.completions.create(model="other", prompt="x", max_tokens=1)
        with pytest.raises(text_generation.errors.ValidationError, match="max_new_tokens"):
            await text_generation.AsyncClient(served_model).generate("x", max_new_tokens=10_000)
        async with aiohttp.ClientSession(served_model) as s:
            statuses = []
            for path, data in [("/v1/completions", b"{not json"), ("/v1/completions", b'{"prompt": 5}'),
                               ("/v1/completions", b'{"prompt": "", "max_tokens": 1}'),
                               ("/v1/completions", b'{"prompt": "x", "logprobs": "many"}'),
                               ("/v1/completions", b'{"prompt": [99999]}'),
                               ("/generate", b'{"inputs": "x", "parameters": {"top_p": 1.0}}')]:
                async with s.post(path, data=data, headers={"Content-Type": "application/json"}) as r:
                    statuses.append((r.status, await r.json()))
            return statuses

    statuses = run(go())
    for status, body in statuses[:-1]:
        assert status == 400 and body["error"]["code"] == 400 and body["error"]["message"], body
    assert "logprobs" in statuses[3][1]["error"]["message"] and statuses[3][1]["error"]["param"] == "logprobs"
    # TGI answers validation errors with 422 and an error_type, as its router does.
    assert statuses[-1] == (422, {"error": "Input validation error: `top_p` must be > 0.0 and < 1.0",
                                  "error_type": "validation"})


def test_calib_serve_on_a_missing_directory_exits_2_with_one_line(tmp_path):
    missing = tmp_path / "no-such-model"
    done = subprocess.run(calib_command("serve", str(missing)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and str(missing) in done.stderr and "does not exist" in done.stderr


def test_calib_serve_on_a_broken_model_raises_a_one_line_input_error(tmp_path):
    from calib.cli.serve import serve

    for name, text in [("config.json", "{not json"), ("model.safetensors", ""), ("tokenizer.json", "{}")]:
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match="cannot load the model") as raised:
        serve.main([str(tmp_path)], standalone_mode=False)
    assert "\n" not in str(raised.value) and str(tmp_path) in str(raised.value)
