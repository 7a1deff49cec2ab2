"""Generation servers behind one protocol (docs/architecture.md "Seams": Server).

Build a server from its spec table with :func:`create_server`; the kinds (``openai``, ``tgi``,
``anthropic``, ``embedded``) load on first use, so importing this package stays light. The package
exports the seam's types (``base.py``), the registry, the request cache and the extraction scores.
"""

from __future__ import annotations

from calib.servers.base import (
    Capabilities,
    CapabilityError,
    ChatMessage,
    ChatParams,
    ChatResponse,
    Chatting,
    Completion,
    Embedding,
    RequestFailed,
    SamplingParams,
    ScoredContinuation,
    Scoring,
    Server,
    ServerError,
    Tokenizing,
    TokenLogprob,
    Tool,
    ToolCall,
    require,
)
from calib.servers.cache import RequestCache, cache_key
from calib.servers.registry import KINDS, create_server, register
from calib.servers.scoring import ExtractionScores, extraction_scores

__all__ = [
    "Capabilities",
    "CapabilityError",
    "ChatMessage",
    "ChatParams",
    "ChatResponse",
    "Chatting",
    "Completion",
    "Embedding",
    "ExtractionScores",
    "KINDS",
    "RequestCache",
    "RequestFailed",
    "SamplingParams",
    "ScoredContinuation",
    "Scoring",
    "Server",
    "ServerError",
    "TokenLogprob",
    "Tokenizing",
    "Tool",
    "ToolCall",
    "cache_key",
    "create_server",
    "extraction_scores",
    "register",
    "require",
]
