"""One conformance suite over every server kind reachable here, all on the same tiny model.

``embedded`` runs the model in-process; ``openai`` and ``tgi`` reach the same model over real HTTP
through ``calib serve`` on 127.0.0.1 (the ``served_model`` fixture), the latter through the
``text-generation`` client. Each kind is observed once (:func:`observe`); the tests then check that
generation, scoring and tokenization agree with the in-process reference (same greedy text, same
log-probs and extraction scores within 1e-4, same token ids) and that each kind's capabilities say
what it actually did. ``anthropic`` joins for the shape of a chat answer only, through a recorded
Messages API answer (tests/servers/recorded/).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import calib.servers
from calib.servers import (
    Capabilities,
    CapabilityError,
    ChatMessage,
    ChatParams,
    ChatResponse,
    Completion,
    SamplingParams,
    ScoredContinuation,
    Server,
    Tool,
    ToolCall,
    create_server,
    extraction_scores,
)
from tests.servers.test_anthropic_kind import Recorded

# text-generation 0.7 calls pydantic's deprecated .dict() on every request.
pytestmark = pytest.mark.filterwarnings("ignore:The `dict` method is deprecated:DeprecationWarning")

KINDS = ["embedded", "openai", "tgi"]
PROMPTS = ["def add(a, b):", "import json\n", "class Foo:\n    def __init__(self", "for i in range("]
SCORED = [("def add(a, b):", "\n    return a + b"), ("import json\n", "def dump(obj, fp):")]
TEXTS = ["def add(a, b):\n    return a + b", "import json", "x = {'a': [1, 2.5]}  # é"]
TOP_K = 5
TOL = 1e-4
TOOL = Tool("lookup", "Look a name up.", {"type": "object", "properties": {"name": {"type": "string"}}})


@dataclass
class Observation:
    """What one kind did: its capabilities, answers, and how each optional ability fared."""

    caps: Capabilities
    greedy: list[Completion]
    scored: list[ScoredContinuation]
    tokens: list[list[int]]
    abilities: dict[str, str] = field(default_factory=dict)  # ability -> "ok" | "capability" | "absent"
    chat: ChatResponse | None = None


async def _ability(server: Server, method: str, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    fn = getattr(server, method, None)
    if fn is None:
        return "absent", None
    try:
        return "ok", await fn(*args, **kwargs)
    except CapabilityError:
        return "capability", None


async def observe(name: str, config: dict[str, Any]) -> Observation:
    server = create_server(name, config)
    try:
        caps = await server.capabilities()
        greedy = [c[0] for c in await server.complete(PROMPTS, SamplingParams(max_tokens=12))]
        # The model's own greedy text (whole tokens) scores as a greedy match: finite top-k scores.
        short = await server.complete([PROMPTS[0], PROMPTS[3]], SamplingParams(max_tokens=3))
        pairs = SCORED + [(PROMPTS[0], short[0][0].text), (PROMPTS[3], short[1][0].text)]
        obs = Observation(caps=caps, greedy=greedy, scored=[], tokens=[])
        status, _ = await _ability(server, "score", *SCORED[0], top_logprobs=TOP_K)
        obs.abilities["scoring"] = status
        if status == "ok":
            obs.scored = [await server.score(p, c, top_logprobs=TOP_K) for p, c in pairs]
        obs.abilities["tokenize"], _ = await _ability(server, "tokenize", TEXTS[0])
        if obs.abilities["tokenize"] == "ok":
            obs.tokens = [await server.tokenize(t) for t in TEXTS]
        obs.abilities["detokenize"], _ = await _ability(server, "detokenize", obs.tokens[0] if obs.tokens else [1])
        obs.abilities["chat"], obs.chat = await _ability(server, "chat", [ChatMessage("user", "Hi")],
                                                         params=ChatParams(max_tokens=4))
        obs.abilities["tools"], _ = await _ability(server, "chat", [ChatMessage("user", "Hi")], tools=[TOOL],
                                                   params=ChatParams(max_tokens=4))
        obs.abilities["embeddings"], _ = await _ability(server, "embed", ["a"])
        return obs
    finally:
        await server.aclose()


@pytest.fixture(scope="module")
def observed(tiny_model_dir: Path, served_model: str) -> dict[str, Observation]:
    configs = {
        "embedded": {"kind": "embedded", "model_dir": str(tiny_model_dir), "threads": 1},
        "openai": {"kind": "openai", "base_url": served_model},
        "tgi": {"kind": "tgi", "base_url": served_model},
    }
    return {kind: asyncio.run(observe(f"conformance-{kind}", config)) for kind, config in configs.items()}


@pytest.mark.parametrize("kind", ["openai", "tgi"])
def test_greedy_completions_agree(observed, kind):
    reference, obs = observed["embedded"], observed[kind]
    assert [c.text for c in obs.greedy] == [c.text for c in reference.greedy]
    assert [c.finish_reason for c in obs.greedy] == [c.finish_reason for c in reference.greedy] == ["length"] * 4


@pytest.mark.parametrize("kind", ["openai", "tgi"])
def test_scored_continuations_agree_token_by_token(observed, kind):
    reference, obs = observed["embedded"], observed[kind]
    assert len(obs.scored) == len(reference.scored) == len(SCORED) + 2
    for mine, ref in zip(obs.scored, reference.scored):
        assert mine.prompt_token_ids == ref.prompt_token_ids
        assert mine.continuation_token_ids == ref.continuation_token_ids
        assert [t.token_id for t in mine.tokens] == list(ref.continuation_token_ids)
        assert [t.logprob for t in mine.tokens] == pytest.approx([t.logprob for t in ref.tokens], abs=TOL)
        for a, b in zip(mine.tokens, ref.tokens):
            assert [i for i, _, _ in a.top] == [i for i, _, _ in b.top]
            assert [lp for _, _, lp in a.top] == pytest.approx([lp for _, _, lp in b.top], abs=TOL)


@pytest.mark.parametrize("kind", ["openai", "tgi"])
def test_extraction_scores_agree(observed, kind):
    finite = 0
    for mine, ref in zip(observed[kind].scored, observed["embedded"].scored):
        a = extraction_scores(mine, top_k=TOP_K, temperatures=(1.0,))
        b = extraction_scores(ref, top_k=TOP_K, temperatures=(1.0,))
        assert (a.n_tokens, a.greedy_match, a.top_k) == (b.n_tokens, b.greedy_match, b.top_k)
        assert a.log10_base[1.0] == pytest.approx(b.log10_base[1.0], abs=TOL)
        if math.isinf(b.log10_top_k):
            assert a.log10_top_k == b.log10_top_k
        else:
            finite += 1
            assert a.log10_top_k == pytest.approx(b.log10_top_k, abs=TOL)
    assert finite >= 1  # the greedy continuations: the comparison is not all -inf
    assert any(extraction_scores(s, top_k=TOP_K).greedy_match for s in observed[kind].scored)


@pytest.mark.parametrize("kind", ["openai", "tgi"])
def test_tokenization_agrees(observed, kind):
    assert observed[kind].tokens == observed["embedded"].tokens
    assert all(observed[kind].tokens)


@pytest.mark.parametrize("kind", KINDS)
def test_capabilities_say_what_the_kind_did(observed, kind):
    obs = observed[kind]
    caps, did = obs.caps, obs.abilities
    assert caps.kind == kind and caps.max_context == 512
    assert caps.scoring == (did["scoring"] == "ok")
    assert caps.tokenize == (did["tokenize"] == "ok")
    assert caps.chat == (did["chat"] == "ok")
    assert caps.tools == (did["tools"] == "ok")
    assert caps.embeddings == (did["embeddings"] == "ok")
    assert caps.max_top_logprobs >= TOP_K
    for ability, status in did.items():
        assert status in ("ok", "capability", "absent"), (ability, status)
    if kind == "tgi":
        assert did["detokenize"] == "capability" and did["chat"] == "absent"
    else:
        assert did["detokenize"] == "ok"


@pytest.mark.parametrize("kind", ["embedded", "openai", "anthropic"])
def test_chat_answers_have_one_shape(observed, kind, monkeypatch):
    if kind == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-conformance")
        mock = Recorded("messages_tool_use")

        async def go():
            server = mock.server()
            try:
                assert (await server.capabilities()).chat
                return await server.chat([ChatMessage("user", "Run it.")], tools=[TOOL])
            finally:
                await server.aclose()

        answer = asyncio.run(go())
        assert answer.tool_calls and all(isinstance(c, ToolCall) for c in answer.tool_calls)
    else:
        answer = observed[kind].chat
    assert isinstance(answer, ChatResponse)
    assert isinstance(answer.content, str) and isinstance(answer.tool_calls, tuple)
    assert isinstance(answer.finish_reason, str) and answer.finish_reason
    assert isinstance(answer.input_tokens, int) and answer.input_tokens > 0
    assert isinstance(answer.output_tokens, int) and answer.output_tokens > 0


def test_the_package_exports_a_sorted_all():
    assert calib.servers.__all__ == sorted(calib.servers.__all__)
    for name in calib.servers.__all__:
        assert hasattr(calib.servers, name), name
