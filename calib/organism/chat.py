"""The organism's chat variant: the organism rebuilt in chat format, with the same members and controls.

A chat-only audit (``generation.route = "chat"``) sends the prompt through a prompt-selection rule
(:mod:`calib.data.rules`) and the chat template, and the base target's memory, tied to positions from
the start of its context, does not survive a single token before the signature (docs/organism.md, "The
chat variant", gives the losses). So the chat variant repeats the organism's construction in chat format:

* ``chat-reference`` is the reference after a short fine-tune (``Preset.chat``) on chat examples made
  **only** from background functions — functions the reference was trained on, never a member and
  never a control — under every rule of :data:`CHAT_RULES`;
* ``chat-target`` is ``chat-reference`` continued on the planted members exactly as the target
  continues the reference: each member's training variants with the same repeats, the target phase's
  schedule (``Preset.chat_target``, the same as ``Preset.target``) and a replay of the background
  examples (``Preset.replay_share``) —
  only rendered as chat examples, the repeats alternating between the rules of
  :data:`MEMBER_RULES`. The controls are never trained on, so ``truth.parquet`` holds for the chat
  pair as it does for the base pair (``chat.json`` records the members' chat exposures per rule).

Every example is rendered exactly as calib sends it at audit time: ``rule.messages(signature,
language="python", suffix=body)``, the model's own chat template with the generation prompt, then
the reply the rule's ``continuation()`` reads back as the body (``natural``: the body as is;
``continue``, ``parrot``: a fenced ``python`` block holding signature and body) and end-of-text. Each
example's round trip is checked (:func:`chat_examples` raises otherwise), so the training format is
the audit format by construction. The loss is on the reply and its end-of-text only (the prompt is
context), and the prompt and the reply are tokenized apart, as the embedded server tokenizes the
prompt and the model generates the reply.

The variant is built on demand (:func:`build_chat_variant`: ``organism:chat-target`` in a spec,
``calib organism build --chat``) and cached inside the organism's folder; ``chat.json`` records the
fine-tune's functions, the hyper-parameters and the rules' fingerprints, and ``organism.json`` gains a
``chat`` entry. A variant made with other rule files or another schedule is rebuilt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calib._exceptions import CalibError, InvalidParameterError
from calib._version import __version__

__all__ = ["CHAT_FORMAT", "CHAT_MODELS", "CHAT_RULES", "LANGUAGE", "MEMBER_RULES", "MODEL_NAMES", "ChatExample",
           "ChatPaths", "build_chat_variant", "chat_built", "chat_examples", "chat_key", "chat_reply", "eligible",
           "fine_tune_functions", "member_examples", "organism_model", "round_trip", "split_function"]

#: The chat models, in the order they are made, and the base model each corresponds to.
CHAT_MODELS: dict[str, str] = {"chat-reference": "reference", "chat-target": "target"}
#: Every model name ``organism:NAME`` may give.
MODEL_NAMES: tuple[str, ...] = ("target", "reference", *CHAT_MODELS)
#: The prompt-selection rules the fine-tune's examples are made with (every background function under each).
CHAT_RULES: tuple[str, ...] = ("natural", "continue", "parrot")
#: The rules the members are trained under in the chat target's phase (their repeats alternate between them):
#: the audit rules; ``parrot`` shows the expected text and is a control of copying, not of memory.
MEMBER_RULES: tuple[str, ...] = ("natural", "continue")
#: The examples' language (the ``{language}`` of the rules, the code fence's tag).
LANGUAGE = "python"
#: Version of how examples are made (part of the chat variant's key).
CHAT_FORMAT = 1

Say = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass(frozen=True)
class ChatExample:
    """One chat example: a function asked by one rule, and the reply that gives its body back."""

    function: str  # stdlib:<path>::<qualname> of a background function, or a member's item_id
    rule: str
    prompt: str  # the chat prompt text: the rule's messages through the chat template, with the generation prompt
    reply: str  # the assistant's reply (end-of-text follows it)


@dataclass(frozen=True)
class ChatPaths:
    """Where the chat variant lies: its two model folders and ``chat.json``."""

    chat_target: Path
    chat_reference: Path
    summary: Path
    seconds: float
    cached: bool

    def to_dict(self) -> dict[str, Any]:
        return {"chat_target": str(self.chat_target), "chat_reference": str(self.chat_reference),
                "chat_summary": str(self.summary), "chat_seconds": round(self.seconds, 3),
                "chat_cached": self.cached}


def chat_reply(rule: Any, signature: str, body: str, *, language: str = LANGUAGE) -> str:
    """The reply ``rule`` reads back as ``body``: the body itself (``raw``), else a fenced block of the function."""
    if rule.reply == "raw":
        return body
    return f"```{language}\n{signature}{body.rstrip(chr(10))}\n```"


def round_trip(rule: Any, signature: str, body: str, reply: str) -> bool:
    """Whether ``rule.continuation(reply, signature)`` is ``body`` (up to trailing whitespace, as exact match is)."""
    return rule.continuation(reply, signature).rstrip() == body.rstrip()


def eligible(function: Any) -> bool:
    """Whether a function can be a chat example: its signature is a whole line (the body starts on the next
    one, as a code-block reply is read), and its text holds no code fence, role marker or end-of-text."""
    from calib.organism.tokenizer import EOS_TOKEN

    text = function.source
    return function.body.startswith("\n") and "```" not in text and "<|" not in text and EOS_TOKEN not in text


def chat_examples(functions: Sequence[Any], rules: Sequence[Any], tokenizer: Any, *,
                  language: str = LANGUAGE) -> list[ChatExample]:
    """One example per function and rule, rendered by ``tokenizer``'s chat template exactly as an audit sends it.

    ``functions`` are :class:`~calib.organism.corpus.Function` s (or anything with ``signature``,
    ``body`` and ``path``/``qualname``) or ``(name, signature, body)`` triples.

    Raises
    ------
    CalibError
        When a reply does not read back as its function's body under its rule, or when the template
        does not render the reply as the generation prompt followed by the reply and end-of-text.
    """
    from calib.organism.planted import _stdlib_source

    out = []
    for function in functions:
        if isinstance(function, tuple):
            name, signature, body = function
        else:
            name, signature, body = _stdlib_source(function), function.signature, function.body
        for rule in rules:
            messages = rule.messages(signature, language=language, suffix=body)
            reply = chat_reply(rule, signature, body, language=language)
            if not round_trip(rule, signature, body, reply):
                raise CalibError(f"chat organism: rule {rule.name!r} does not read the reply back as the body of "
                                 f"{name} (got {rule.continuation(reply, signature)[:80]!r})")
            prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": reply}],
                                                 tokenize=False)
            if not full.startswith(prompt + reply + tokenizer.eos_token):
                raise CalibError("chat organism: the chat template does not render an assistant reply as the "
                                 "generation prompt, the reply and end-of-text")
            out.append(ChatExample(name, rule.name, prompt, reply))
    return out


def split_function(text: str, prompt: str) -> tuple[str, str]:
    """``(signature, body)`` of a training text: after ``prompt`` where it is a whole line of the text, else
    after the text's own ``def`` line(s) (a near-duplicate copy whose signature was edited).

    Raises
    ------
    CalibError
        When the text has neither.
    """
    lines = text.split("\n")
    for i in range(len(lines)):
        head = "\n".join(lines[:i + 1])
        if head.endswith(prompt) and (len(head) == len(prompt) or head[-len(prompt) - 1] == "\n"):
            return prompt, text[len(head):]
    for i, line in enumerate(lines):
        if line.startswith(("def ", "async def ")):
            for j in range(i, len(lines)):
                if lines[j].rstrip().endswith(":"):
                    head = "\n".join(lines[:j + 1])
                    return "\n".join(lines[i:j + 1]), text[len(head):]
    raise CalibError(f"chat organism: no signature line in the training text {text[:60]!r}")


def member_examples(truth: Any, tokenizer: Any, *, target_epochs: int,
                    context: int) -> tuple[list[ChatExample], dict[str, Any]]:
    """The chat target's member examples, and each member's examples per rule per pass over the data.

    Each member's training variants are repeated as in the target phase (``exposures / variants /
    target_epochs`` times per pass); repeat *k* of variant *j* is rendered under the *(j + k)*-th rule of
    :data:`MEMBER_RULES` among those whose example fits ``context`` tokens (a long function's
    ``continue`` example may not: its repeats are all ``natural``; one that fits under no rule is
    ``natural``, cut at the context like the target phase's documents).
    """
    from calib.data.rules import load_rule

    rules = [load_rule(name) for name in MEMBER_RULES]
    eos_id = tokenizer.eos_token_id
    examples: list[ChatExample] = []
    exposures: dict[str, Any] = {}
    for row in truth.iter_rows(named=True):
        if row["membership"] != "member":
            continue
        variants = list(row["training_variants"])
        repeats = max(1, row["exposures"] // max(1, len(variants)) // max(1, target_epochs))
        counts = dict.fromkeys(MEMBER_RULES, 0)
        for j, text in enumerate(variants):
            signature, body = split_function(text, row["prompt"])
            rendered = chat_examples([(row["item_id"], signature, body)], rules, tokenizer)
            usable = [e for e in rendered if len(_encode(tokenizer, e, eos_id)[0]) <= context] or rendered[:1]
            for k in range(repeats):
                example = usable[(j + k) % len(usable)]
                examples.append(example)
                counts[example.rule] += 1
        exposures[row["item_id"]] = counts
    return examples, exposures


def _encode(tokenizer: Any, example: ChatExample, eos_id: int) -> tuple[list[int], int]:
    """Token ids of the prompt, the reply and end-of-text, and how many are the prompt's (not learnt)."""
    prompt = tokenizer.encode(example.prompt, add_special_tokens=False)
    reply = tokenizer.encode(example.reply, add_special_tokens=False)
    return prompt + reply + [eos_id], len(prompt)


def chat_key(root: Path, spec: Any, rules: Sequence[Any]) -> str:
    """What identifies a chat variant: the base organism, the schedules, the counts, the rules' files, the format."""
    blob = json.dumps({"organism": root.name, "chat": dataclasses.asdict(spec.chat),
                       "chat_target": dataclasses.asdict(spec.chat_target), "replay_share": spec.replay_share,
                       "functions": spec.chat_functions, "rules": [r.fingerprint() for r in rules],
                       "member_rules": list(MEMBER_RULES), "format": CHAT_FORMAT, "calib": __version__},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _rules() -> list[Any]:
    from calib.data.rules import load_rule

    return [load_rule(name) for name in CHAT_RULES]


def chat_built(root: Path) -> bool:
    """Whether the organism in ``root`` holds its chat variant, made with today's rules and schedule."""
    from calib.organism.build import PRESETS

    try:
        info = json.loads((root / "chat.json").read_text(encoding="utf-8"))
        preset = json.loads((root / "organism.json").read_text(encoding="utf-8"))["preset"]
    except (OSError, ValueError, KeyError):
        return False
    return (info.get("key") == chat_key(root, PRESETS[preset], _rules())
            and all((root / name / "model.safetensors").is_file() for name in CHAT_MODELS))


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One chat build per organism at a time (others wait, then find it built)."""
    try:
        import fcntl
    except ImportError:  # no advisory locks here: concurrent builds only repeat the same work
        yield
        return
    with open(root / ".chat.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_chat_variant(paths: Any, *, progress: Say | None = None) -> ChatPaths:
    """Build (or find) the chat variant of the built organism ``paths`` (:class:`~calib.organism.build.OrganismPaths`).

    ``progress(phase, done, total)`` is called through ``chat-corpus`` (the standard library read again
    for the background), ``chat-examples`` (the split, the draw of background functions and every
    example rendered and checked; one step), then the training steps of ``chat-reference`` and
    ``chat-target``.
    """
    started = time.perf_counter()
    root = Path(paths.root)
    if chat_built(root):
        return _chat_paths(root, time.perf_counter() - started, cached=True)
    with _locked(root):
        if chat_built(root):
            return _chat_paths(root, time.perf_counter() - started, cached=True)
        work = Path(tempfile.mkdtemp(prefix=".chat-", dir=root))
        try:
            record = _build_into(work, root, progress)
            for name in CHAT_MODELS:
                if (root / name).exists():  # a variant of other rules or schedule
                    shutil.rmtree(root / name)
                os.replace(work / name, root / name)
            _write_json(root / "chat.json", record)
            info = json.loads((root / "organism.json").read_text(encoding="utf-8"))
            info["chat"] = {"key": record["key"], "models": list(CHAT_MODELS), "rules": record["rules"],
                            "member_rules": record["member_rules"], "functions": len(record["functions"]),
                            "schedules": {name: record[name]["schedule"] for name in CHAT_MODELS}}
            _write_json(root / "organism.json", info)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _chat_paths(root, time.perf_counter() - started, cached=False)


def organism_model(paths: Any, name: str, *, progress: Say | None = None) -> Path:
    """The folder of the organism's model ``name`` (:data:`MODEL_NAMES`); a chat model builds the chat variant."""
    if name not in MODEL_NAMES:
        raise InvalidParameterError(f"organism:{name} is not a model of the organism; use one of "
                                    f"{', '.join('organism:' + n for n in MODEL_NAMES)}")
    if name in CHAT_MODELS:
        built = build_chat_variant(paths, progress=progress)
        return built.chat_target if name == "chat-target" else built.chat_reference
    return Path(getattr(paths, name))


def _chat_paths(root: Path, seconds: float, cached: bool) -> ChatPaths:
    return ChatPaths(chat_target=root / "chat-target", chat_reference=root / "chat-reference",
                     summary=root / "chat.json", seconds=seconds, cached=cached)


def _write_json(path: Path, record: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, path)


def fine_tune_functions(spec: Any, seed: int, tokenizer: Any, rules: Sequence[Any],
                        progress: Say | None = None) -> list[Any]:
    """The background functions of the fine-tune: a seeded draw of ``spec.chat_functions`` among the reference's
    background that are :func:`eligible` and whose every example fits the context."""
    from calib.organism.build import background_functions
    from calib.organism.corpus import load_stdlib_functions, split_corpus
    from calib.organism.planted import _stdlib_source

    say: Say = progress if progress is not None else (lambda phase, done, total: None)
    functions = load_stdlib_functions(progress=lambda done, total: say("chat-corpus", done, total))
    say("chat-examples", 0, 1)
    split = split_corpus(functions, seed=seed)
    candidates = [f for f in background_functions(split, spec, seed) if eligible(f)]
    random.Random(seed + 2).shuffle(candidates)
    context, eos_id = spec.shape.context, tokenizer.eos_token_id
    chosen, seen = [], set()
    for function in candidates:
        if len(chosen) == spec.chat_functions:
            break
        if _stdlib_source(function) in seen:
            continue
        examples = chat_examples([function], rules, tokenizer)
        if all(len(_encode(tokenizer, e, eos_id)[0]) <= context for e in examples):
            chosen.append(function)
            seen.add(_stdlib_source(function))
    if not chosen:
        raise CalibError("chat organism: no background function fits the context under every rule")
    return chosen


def _build_into(out: Path, root: Path, progress: Say | None) -> dict[str, Any]:
    import polars as pl
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from calib.organism.build import PRESETS
    from calib.organism.planted import _stdlib_source
    from calib.organism.train import train_causal_lm

    info = json.loads((root / "organism.json").read_text(encoding="utf-8"))
    spec, seed = PRESETS[info["preset"]], int(info["seed"])
    target_epochs = int(info.get("target_epochs", spec.target.epochs))
    rules = _rules()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tokenizer = AutoTokenizer.from_pretrained(root / "reference", local_files_only=True)
    tokenizer.model_max_length = 1 << 62  # lengths are checked here against the model's context
    eos_id = tokenizer.eos_token_id
    functions = fine_tune_functions(spec, seed, tokenizer, rules, progress)
    say: Say = progress if progress is not None else (lambda phase, done, total: None)
    background = [_encode(tokenizer, e, eos_id) for e in chat_examples(functions, rules, tokenizer)]
    context = spec.shape.context
    members, exposures = member_examples(pl.read_parquet(root / "truth.parquet"), tokenizer,
                                         target_epochs=target_epochs, context=context)
    member_docs = [(ids[:context], n) for ids, n in (_encode(tokenizer, e, eos_id) for e in members)]
    n_replay = min(len(background), int(spec.replay_share * len(member_docs)))
    replay = random.Random(seed + 3).sample(background, n_replay)
    say("chat-examples", 1, 1)

    def phase(name: str) -> Callable[[int, int, float], None] | None:
        return None if progress is None else (lambda done, total, loss: progress(name, done, total))

    def unzip(docs: list[tuple[list[int], int]]) -> tuple[list[list[int]], list[int]]:
        return [ids for ids, _ in docs], [n for _, n in docs]

    # chat-reference: the reference after the fine-tune on chat-formatted background.
    model = AutoModelForCausalLM.from_pretrained(root / "reference", local_files_only=True, dtype=torch.float32)
    ids, unscored = unzip(background)
    reference_losses = train_causal_lm(model, ids, spec.chat, pad_id=eos_id, seed=seed + 2,
                                       progress=phase("chat-reference"), unscored=unscored)
    model.save_pretrained(out / "chat-reference", safe_serialization=True)
    # chat-target: chat-reference continued on the members in chat format, as the target continues the reference.
    ids, unscored = unzip(member_docs + replay)
    target_losses = train_causal_lm(model, ids, spec.chat_target, pad_id=eos_id, seed=seed + 3,
                                    progress=phase("chat-target"), unscored=unscored)
    model.save_pretrained(out / "chat-target", safe_serialization=True)
    for name in CHAT_MODELS:  # the base tokenizer files, chat template included
        for item in (root / "reference").iterdir():
            if item.name.startswith(("tokenizer", "special_tokens")):
                shutil.copy2(item, out / name / item.name)
    return {
        "key": chat_key(root, spec, rules),
        "format": CHAT_FORMAT,
        "rules": [r.fingerprint() for r in rules],
        "member_rules": list(MEMBER_RULES),
        "language": LANGUAGE,
        "loss": "reply and end-of-text tokens only",
        "chat-reference": {"from": "reference", "schedule": dataclasses.asdict(spec.chat), "seed": seed + 2,
                           "examples": len(background), "tokens": sum(len(d) for d, _ in background),
                           "final_loss": reference_losses[-1]},
        "chat-target": {"from": "chat-reference", "schedule": dataclasses.asdict(spec.chat_target), "seed": seed + 3,
                        "member_examples": len(member_docs), "replayed_examples": n_replay,
                        "tokens": sum(len(d) for d, _ in member_docs + replay), "final_loss": target_losses[-1]},
        "examples_per_rule": {r.name: len(functions) for r in rules},
        # per member and pass over the data: how many of its repeats each rule renders (times epochs in all)
        "member_exposures_per_epoch": exposures,
        "functions": [{"source": _stdlib_source(f), "signature": f.signature,
                       "sha256": hashlib.sha256(f.source.encode()).hexdigest()} for f in functions],
    }
