"""Output-token log-probs through chat (issue "hosted"): the capability probe, the request, the answer.

The host is the tiny organism's chat target (docs/organism.md) behind ``calib serve`` and
tests/_hosted.py's proxy: ``direct`` (everything), ``chat_logprobs`` (chat only, log-probs forwarded, at
most 20 alternatives) and ``chat_only`` (chat only, a request for log-probs refused with HTTP 400 as the
OpenAI API refuses it for a model without them). The reference is the same weights loaded with
transformers and decoded greedily by hand (a full forward pass per token, ``torch.log_softmax`` of the
last logits after the chat-templated prompt), so the served log-probs are checked against an independent
computation, not against calib.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import torch
import transformers

from calib.servers import CapabilityError, ChatMessage, ChatParams, ServerError, create_server
from calib.servers._openai_wire import chat_token_logprobs
from calib.servers.base import allowed_procedures
from tests._hosted import HostedProxy
from tests._served import serving

# text-generation 0.7 calls pydantic's deprecated .dict() on every request.
pytestmark = pytest.mark.filterwarnings("ignore:The `dict` method is deprecated:DeprecationWarning")

MESSAGES = [ChatMessage("user", "def add(a, b):")]
STEPS = 12
TOP = 5
TOL = 1e-5  # same weights in float32; calib serve decodes with a KV cache, the reference without


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def chat_target(organism_tiny_chat):
    return organism_tiny_chat.chat_target


@pytest.fixture(scope="module")
def served_target(chat_target, tmp_path_factory):
    with serving(chat_target, "organism-target", tmp_path_factory.mktemp("serve") / "stderr.txt") as url:
        yield url


@pytest.fixture(scope="module")
def reference(chat_target):
    """The greedy reply to MESSAGES by hand: ``(token texts, log-probs, top-TOP log-probs per step)``."""
    model = transformers.AutoModelForCausalLM.from_pretrained(chat_target, dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(chat_target)
    prompt = tok.apply_chat_template([{"role": m.role, "content": m.content} for m in MESSAGES], tokenize=False,
                                     add_generation_prompt=True)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    texts, values, tops = [], [], []
    with torch.inference_mode():
        for _ in range(STEPS):
            logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1], dim=-1)
            token = int(torch.argmax(logprobs))
            if token == tok.eos_token_id:
                break
            texts.append(tok.decode([token]))
            values.append(float(logprobs[token]))
            tops.append([float(v) for v in torch.topk(logprobs, TOP).values])
            ids.append(token)
    return texts, values, tops


def openai_server(url: str):
    return create_server("target", {"kind": "openai", "base_url": url, "model": "organism-target", "max_retries": 0})


async def _probe_and_chat(url: str, params: ChatParams | None) -> tuple[Any, Any]:
    server = openai_server(url)
    try:
        caps = await server.capabilities()
        reply = await server.chat(MESSAGES, params=params) if params is not None else None
        return caps, reply
    finally:
        await server.aclose()


@pytest.mark.parametrize("mode", ["direct", "chat_logprobs", "chat_only"])
def test_the_probe_reports_chat_logprobs_where_the_host_returns_them(served_target, mode):
    with HostedProxy(served_target, mode) as host:
        caps, _ = run(_probe_and_chat(host.url, None))
        chats = host.requests["/v1/chat/completions"]
    gives = mode != "chat_only"
    assert caps.chat and caps.chat_logprobs is gives
    assert caps.chat_max_top_logprobs == (20 if gives else 0)
    assert caps.complete is (mode == "direct") and caps.output_logprobs is (mode == "direct")
    # the probe asked log-probs with 20 alternatives; the chat-only host refused that and, asked again with 1,
    # refused again
    assert host.refused == (2 if mode == "chat_only" else 0)
    assert chats == (4 if mode == "chat_only" else 3)  # besides the plain one-token chat and the tools probe
    allows = allowed_procedures(caps)
    assert ("extraction/census greedy_logprob, chat route" in allows) is gives
    assert "extraction/census greedy_prefix, sampled through chat (a prompt-selection rule)" in allows
    assert ("extraction/census greedy_logprob, completion route" in allows) is (mode == "direct")
    if not gives:
        assert any("chat without output-token log-probs" in note for note in caps.notes)


def test_the_probe_reads_a_lower_limit_of_alternatives_from_the_refusal(served_target):
    with HostedProxy(served_target, "chat_logprobs", chat_top_limit=8) as host:
        caps, _ = run(_probe_and_chat(host.url, None))
    assert caps.chat_logprobs and caps.chat_max_top_logprobs == 8  # "Expected a value <= 8, but got 20"
    assert host.refused == 1


@pytest.mark.parametrize("mode", ["chat_logprobs", "direct"])
def test_a_greedy_chat_replys_logprobs_are_the_models_own(served_target, reference, mode):
    texts, values, tops = reference
    with HostedProxy(served_target, mode) as host:
        _, reply = run(_probe_and_chat(host.url, ChatParams(max_tokens=STEPS, logprobs=TOP)))
        sent = host.requests["/v1/chat/completions"]
    assert sent >= 1 and reply.logprobs is not None
    # one entry per generated token, whose texts join to the reply
    assert reply.finish_reason == "length" and len(reply.logprobs) == reply.output_tokens == len(texts) == STEPS
    assert "".join(t.token for t in reply.logprobs) == reply.content == "".join(texts)
    assert [t.token for t in reply.logprobs] == texts
    for step, token in enumerate(reply.logprobs):
        assert token.token_id is None  # a chat API names tokens by text
        assert token.logprob == pytest.approx(values[step], abs=TOL)
        alternatives = [lp for _, _, lp in token.top]
        assert len(alternatives) == TOP and alternatives == sorted(alternatives, reverse=True)
        assert alternatives == pytest.approx(tops[step], abs=TOL)
        # greedy: the chosen token is the first alternative
        assert token.top[0][1] == token.token and token.top[0][2] == pytest.approx(token.logprob, abs=TOL)


def test_the_in_process_embedded_kind_gives_the_same_chat_logprobs(chat_target, reference):
    texts, values, tops = reference
    server = create_server("target", {"kind": "embedded", "model_dir": str(chat_target), "threads": 1})

    async def go():
        try:
            return await server.capabilities(), await server.chat(MESSAGES, params=ChatParams(max_tokens=STEPS,
                                                                                              logprobs=TOP))
        finally:
            await server.aclose()

    caps, reply = run(go())
    assert caps.chat_logprobs and caps.chat_max_top_logprobs == 20 and caps.output_logprobs
    assert [t.token for t in reply.logprobs] == texts and reply.content == "".join(texts)
    assert [t.logprob for t in reply.logprobs] == pytest.approx(values, abs=TOL)
    for token, top in zip(reply.logprobs, tops, strict=True):
        assert [lp for _, _, lp in token.top] == pytest.approx(top, abs=TOL)


def test_a_chat_only_host_refuses_chat_logprobs_before_any_request(served_target):
    with HostedProxy(served_target, "chat_only") as host:
        server = openai_server(host.url)

        async def go():
            try:
                await server.capabilities()
                before = host.requests["/v1/chat/completions"]
                with pytest.raises(CapabilityError) as refused:
                    await server.chat(MESSAGES, params=ChatParams(max_tokens=4, logprobs=0))
                after = host.requests["/v1/chat/completions"]
                plain = await server.chat(MESSAGES, params=ChatParams(max_tokens=4))
                return refused.value, after - before, plain
            finally:
                await server.aclose()

        error, sent, plain = run(go())
    message = str(error)
    assert "\n" not in message and message.startswith("server 'target' (openai, model 'organism-target') lacks "
                                                      "chat_logprobs: its chat route returns no output-token log-probs")
    assert sent == 0  # refused by calib, not by the host
    assert plain.content and plain.logprobs is None  # chat without log-probs still works


def test_more_alternatives_than_the_host_gives_are_refused_in_one_line(served_target):
    with HostedProxy(served_target, "chat_logprobs", chat_top_limit=8) as host:
        with pytest.raises(CapabilityError, match=r"^server 'target' \(openai, model 'organism-target'\) returns at "
                                                  r"most 8 top log-probs per chat token, 10 were asked; ask for at "
                                                  r"most 8$"):
            run(_probe_and_chat(host.url, ChatParams(max_tokens=4, logprobs=10)))
    with pytest.raises(ValueError, match=r"logprobs must be None or 0\.\.20 .*got 21"):
        ChatParams(logprobs=21)


def test_the_anthropic_kind_has_no_chat_logprobs(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    server = create_server("judge", {"kind": "anthropic", "model": "claude-x", "base_url": "http://127.0.0.1:9"})

    async def go():
        caps = await server.capabilities()
        with pytest.raises(CapabilityError) as refused:
            await server.chat(MESSAGES, params=ChatParams(logprobs=1))
        await server.aclose()
        return caps, refused.value

    caps, error = run(go())
    assert not caps.chat_logprobs and not caps.output_logprobs
    assert str(error).startswith("server 'judge' (anthropic, model 'claude-x') lacks chat_logprobs: ")
    assert caps.to_dict()["chat_logprobs"] is False and "chat_max_top_logprobs" in caps.to_dict()


def test_the_completion_routes_report_output_logprobs(served_model):
    async def go():
        servers = [create_server("o", {"kind": "openai", "base_url": served_model}),
                   create_server("t", {"kind": "tgi", "base_url": served_model})]
        try:
            return [await s.capabilities() for s in servers]
        finally:
            for s in servers:
                await s.aclose()

    openai_caps, tgi_caps = run(go())
    assert openai_caps.output_logprobs and tgi_caps.output_logprobs
    assert not tgi_caps.chat_logprobs  # the tgi kind does not chat


def test_chat_logprobs_are_read_in_any_order_and_a_missing_field_is_an_error():
    # vLLM lists the sampled token first among the alternatives (here the second most likely); the OpenAI API
    # gives -9999.0 for a token outside its top 20. The shape is the OpenAI chat API's (docs/hosted.md).
    choice = json.loads("""{"message": {"role": "assistant", "content": "ab"}, "logprobs": {"content": [
        {"token": "a", "logprob": -1.5, "bytes": [97], "top_logprobs": [
            {"token": "a", "logprob": -1.5, "bytes": [97]}, {"token": "x", "logprob": -0.4, "bytes": [120]}]},
        {"token": "b", "logprob": -9999.0, "bytes": [98], "top_logprobs": []}]}}""")
    first, second = chat_token_logprobs("h", choice, 2)
    assert (first.token, first.logprob, first.top) == ("a", -1.5, ((None, "x", -0.4), (None, "a", -1.5)))
    assert (second.token, second.logprob, second.top) == ("b", -9999.0, ())
    assert chat_token_logprobs("h", {"message": {"content": ""}, "logprobs": None}, 2) == ()
    with pytest.raises(ServerError, match="server 'h': /v1/chat/completions answered without logprobs.content"):
        chat_token_logprobs("h", {"message": {"content": "ab"}, "logprobs": None}, 2)
