"""Building the model organism: reference and target models with known members, cached.

1. The interpreter's standard library is split by file into background, member candidates and control
   candidates (:mod:`calib.organism.corpus`), and members of three kinds are planted with their
   controls (:mod:`calib.organism.planted`).
2. A byte-level BPE tokenizer is trained on the background; the **reference** model is trained on the
   background alone.
3. The **target** model is the reference continued on the planted members (dense: each member's
   variants repeated) mixed with a replay sample of the background, like the paper's setups where the
   reference is a checkpoint before further training on the target data.
4. The ground truth (``organism.json``, ``truth.parquet``) is written beside the two Hugging Face
   model folders.
5. On demand, the chat variant (``chat-reference``, ``chat-target``: :mod:`calib.organism.chat`) is
   added to the same folder.

Everything is deterministic from (corpus, preset, seed, calib version), which also keys the cache:
``<cache>/organism/<key>/`` is built in a temporary folder and renamed into place when complete, so a
second build is instant and an interrupted one leaves nothing half-written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calib._exceptions import InvalidParameterError
from calib._version import __version__
from calib.organism.corpus import corpus_fingerprint, load_stdlib_functions, split_corpus, stdlib_files
from calib.organism.planted import PlantSpec, plant, target_training_texts, write_truth
from calib.organism.train import PRECISION, ModelShape, TrainSchedule, encode_documents, new_model, train_causal_lm

__all__ = ["CHAT_FIELDS", "PHASES", "PRESETS", "OrganismPaths", "Preset", "WarmUp", "background_functions",
           "build_organism", "cache_root", "organism_folder", "progress_tasks", "training_corpus", "warm_up"]


@dataclass(frozen=True)
class Preset:
    """A size preset: model shape, background size, planted members and the two training phases.

    ``replay_share`` is the number of background documents replayed in the target phase, as a share
    of the target phase's member documents. ``chat``, ``chat_functions`` and ``chat_target`` make the
    chat variant (:mod:`calib.organism.chat`): the background fine-tune's schedule, how many background
    functions it is made of, and the schedule of the chat target's member phase (the target phase's
    epochs and learning rate); they are not part of the base organism's cache key (the base models do
    not depend on them).
    """

    name: str
    shape: ModelShape
    max_background: int
    plant: PlantSpec
    reference: TrainSchedule
    target: TrainSchedule
    replay_share: float
    chat: TrainSchedule
    chat_functions: int
    chat_target: TrainSchedule


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        name="tiny",
        shape=ModelShape(vocab_size=1024, n_layer=2, n_embd=128, n_head=4, context=512),
        max_background=600,
        plant=PlantSpec(n_verbatim=8, verbatim_repeats=8, n_business=4, business_forms=2, business_repeats=4,
                        n_families=3, family_size=4),
        reference=TrainSchedule(epochs=2, lr=2e-3, batch_size=16),
        target=TrainSchedule(epochs=16, lr=3e-3, batch_size=4),
        replay_share=0.1,
        chat=TrainSchedule(epochs=3, lr=1e-3, batch_size=8),
        chat_functions=64,
        chat_target=TrainSchedule(epochs=16, lr=3e-3, batch_size=4),
    ),
    "demo": Preset(
        name="demo",
        shape=ModelShape(vocab_size=4096, n_layer=4, n_embd=256, n_head=4, context=512),
        max_background=3000,
        plant=PlantSpec(n_verbatim=30, verbatim_repeats=8, n_business=16, business_forms=3, business_repeats=3,
                        n_families=8, family_size=5),
        reference=TrainSchedule(epochs=2, lr=1e-3, batch_size=16),
        target=TrainSchedule(epochs=16, lr=2e-3, batch_size=4),
        replay_share=0.1,
        chat=TrainSchedule(epochs=3, lr=1e-3, batch_size=8),
        chat_functions=200,
        chat_target=TrainSchedule(epochs=16, lr=2e-3, batch_size=4),
    ),
}


@dataclass(frozen=True)
class OrganismPaths:
    """Where a built organism lies: the two model folders, the ground-truth table, its root folder."""

    target: Path
    reference: Path
    truth: Path
    summary: Path
    root: Path
    seconds: float
    cached: bool

    @property
    def chat_target(self) -> Path:
        """The chat variant's target folder (built by :func:`calib.organism.chat.build_chat_variant`)."""
        return self.root / "chat-target"

    @property
    def chat_reference(self) -> Path:
        """The chat variant's reference folder (built by :func:`calib.organism.chat.build_chat_variant`)."""
        return self.root / "chat-reference"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready paths (``calib organism build --json``)."""
        return {"target": str(self.target), "reference": str(self.reference), "truth": str(self.truth),
                "summary": str(self.summary), "root": str(self.root), "seconds": round(self.seconds, 3),
                "cached": self.cached}


def cache_root() -> Path:
    """calib's cache folder: ``$CALIB_CACHE_DIR``, else ``$XDG_CACHE_HOME/calib``, else ``~/.cache/calib``."""
    if os.environ.get("CALIB_CACHE_DIR"):
        return Path(os.environ["CALIB_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "calib"


#: Preset fields of the chat variant only: left out of the base organism's key (the chat variant has its own).
CHAT_FIELDS = ("chat", "chat_functions", "chat_target")


def _key(preset: Preset, seed: int, fingerprint: str) -> str:
    base = {k: v for k, v in dataclasses.asdict(preset).items() if k not in CHAT_FIELDS}
    blob = json.dumps({"preset": base, "seed": seed, "corpus": fingerprint,
                       "calib": __version__, "precision": PRECISION}, sort_keys=True, default=str)
    return f"{preset.name}-s{seed}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def _paths(root: Path, seconds: float, cached: bool) -> OrganismPaths:
    return OrganismPaths(target=root / "target", reference=root / "reference", truth=root / "truth.parquet",
                         summary=root / "organism.json", root=root, seconds=seconds, cached=cached)


Say = Callable[[str, int, int], None]  # (phase, done, total)

#: The phases of a build, in order, as ``progress(phase, done, total)`` names them, and their progress labels.
#: ``corpus`` counts standard-library files read; ``split`` and ``tokenizer`` are one step each (their lines
#: repeat while they run); ``reference`` and ``target`` count training steps. The chat variant
#: (:mod:`calib.organism.chat`, built on demand) reads the corpus again (``chat-corpus``), makes its examples
#: (``chat-examples``, one step), then counts the steps of ``chat-reference`` and ``chat-target``.
PHASES: dict[str, str] = {
    "corpus": "reading the standard library",
    "split": "splitting the corpus and planting members",
    "tokenizer": "training the tokenizer",
    "reference": "training the reference model",
    "target": "training the target model",
    "chat-corpus": "reading the standard library for the chat fine-tune",
    "chat-examples": "making the chat examples",
    "chat-reference": "fine-tuning the chat reference",
    "chat-target": "training the chat target on the members in chat format",
}


def progress_tasks(bar: Any) -> Say:
    """A ``progress`` callback for :func:`build_organism` that shows each phase as one task of ``bar``.

    ``bar`` is a rich ``Progress`` or a :class:`calib._progress.LineProgress`; tasks are labelled by
    :data:`PHASES` and added as their phase starts.
    """
    tasks: dict[str, Any] = {}

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(PHASES.get(phase, phase), total=total)  # prints 0/total
            if not done:
                return
        bar.update(tasks[phase], completed=done, total=total)

    return update


def organism_folder(preset: str, *, seed: int = 0, cache_dir: str | Path | None = None) -> Path:
    """Where the organism for ``preset`` and ``seed`` is (or will be) cached; built when it holds organism.json."""
    if preset not in PRESETS:
        raise InvalidParameterError(f"unknown organism preset {preset!r}; choose one of {', '.join(PRESETS)}")
    root_dir = Path(cache_dir) if cache_dir is not None else cache_root()
    return root_dir / "organism" / _key(PRESETS[preset], seed, corpus_fingerprint(stdlib_files()))


def build_organism(preset: str = "demo", *, seed: int = 0, cache_dir: str | Path | None = None,
                   progress: Say | None = None) -> OrganismPaths:
    """Build (or find in the cache) the organism for ``preset`` and ``seed``.

    Parameters
    ----------
    preset
        ``"tiny"`` (tests, about a minute) or ``"demo"`` (the demo study).
    seed
        Seed of every random choice: the split, the planted items, initialisation and batching.
    cache_dir
        Cache folder (default :func:`cache_root`).
    progress
        Called as ``progress(phase, done, total)`` through the phases of :data:`PHASES`: the warm-up (reading
        the corpus, splitting it and planting members, training the tokenizer), then training.
    """
    started = time.perf_counter()
    final = organism_folder(preset, seed=seed, cache_dir=cache_dir)
    spec = PRESETS[preset]
    if (final / "organism.json").is_file():
        return _paths(final, time.perf_counter() - started, cached=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        _build_into(work, spec, seed, progress)
        try:
            os.replace(work, final)
        except OSError:  # another process finished the same build first: keep theirs
            if not (final / "organism.json").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _paths(final, time.perf_counter() - started, cached=False)


def background_functions(split: Any, spec: Preset, seed: int) -> list[Any]:
    """The background functions both models are trained on: a seeded draw of the split's background."""
    background = list(split.background)
    random.Random(seed).shuffle(background)
    return background[:spec.max_background]


def _background(split: Any, spec: Preset, seed: int) -> list[str]:
    """The background documents both models are trained on (the sources of :func:`background_functions`)."""
    return [f.source for f in background_functions(split, spec, seed)]


def training_corpus(paths: OrganismPaths) -> list[tuple[str, str, int]]:
    """``(document_id, text, copies)`` of every distinct document the organism's target was trained on.

    The background (the reference's training data, which the target continues from; rebuilt from the
    interpreter's stdlib with the organism's seed, as at build time) and each member's training
    variants (from ``truth.parquet``). A member's own audited text, when it is one of its training
    variants, has the member's ``item_id`` as its id; other variants get ``ITEM_ID:vN``, background
    documents ``background:N``. ``copies`` counts repeats (per pass over the data).
    """
    import polars as pl

    info = json.loads((paths.root / "organism.json").read_text(encoding="utf-8"))
    spec, seed = PRESETS[info["preset"]], int(info["seed"])
    split = split_corpus(load_stdlib_functions(), seed=seed)
    out: dict[str, list[Any]] = {}
    for i, text in enumerate(_background(split, spec, seed)):
        out.setdefault(text, [f"background:{i}", 0])[1] += 1
    truth = pl.read_parquet(paths.truth)
    for row in truth.filter(pl.col("membership") == "member").iter_rows(named=True):
        repeats = row["exposures"] // max(1, len(row["training_variants"])) // max(1, info.get("target_epochs", 1))
        for j, text in enumerate(row["training_variants"]):
            doc_id = row["item_id"] if text == row["audited"] else f"{row['item_id']}:v{j}"
            entry = out.setdefault(text, [doc_id, 0])
            entry[1] += max(1, repeats)
    return [(doc_id, text, copies) for text, (doc_id, copies) in out.items()]


@dataclass(frozen=True)
class WarmUp:
    """What a build prepares before training: the background, the planted items and their texts, the tokenizer."""

    background: list[str]
    items: list[Any]
    member_texts: list[str]
    tokenizer: Any


def warm_up(spec: Preset, seed: int, progress: Say | None = None) -> WarmUp:
    """The build's work before training, reported as the phases ``corpus``, ``split`` and ``tokenizer``."""
    from calib.organism.tokenizer import train_bpe_tokenizer

    say: Say = progress if progress is not None else (lambda phase, done, total: None)
    functions = load_stdlib_functions(progress=lambda done, total: say("corpus", done, total))
    say("split", 0, 1)
    split = split_corpus(functions, seed=seed)
    background = _background(split, spec, seed)
    items = plant(split, spec.plant, seed=seed)
    member_texts = target_training_texts(items, seed=seed)
    say("split", 1, 1)
    say("tokenizer", 0, 1)
    tokenizer = train_bpe_tokenizer(background, spec.shape.vocab_size)
    say("tokenizer", 1, 1)
    return WarmUp(background, items, member_texts, tokenizer)


def _build_into(out: Path, spec: Preset, seed: int, progress: Say | None) -> None:
    import torch

    from calib.organism.tokenizer import save_tokenizer

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    prepared = warm_up(spec, seed, progress)
    background, items, member_texts, tokenizer = (prepared.background, prepared.items, prepared.member_texts,
                                                  prepared.tokenizer)
    shape = dataclasses.replace(spec.shape, vocab_size=tokenizer.get_vocab_size())
    for name in ("reference", "target"):
        (out / name).mkdir(parents=True)
    eos_id = save_tokenizer(tokenizer, out / "reference", shape.context)
    save_tokenizer(tokenizer, out / "target", shape.context)

    def phase(name: str) -> Callable[[int, int, float], None] | None:
        return None if progress is None else (lambda done, total, loss: progress(name, done, total))

    model = new_model(shape, eos_id=eos_id, seed=seed)
    background_docs = encode_documents(tokenizer, background, context=shape.context, eos_id=eos_id)
    reference_losses = train_causal_lm(model, background_docs, spec.reference, pad_id=eos_id, seed=seed,
                                       progress=phase("reference"))
    model.save_pretrained(out / "reference", safe_serialization=True)

    member_docs = encode_documents(tokenizer, member_texts, context=shape.context, eos_id=eos_id)
    n_replay = min(len(background_docs), int(spec.replay_share * len(member_docs)))
    replay = random.Random(seed + 1).sample(background_docs, n_replay)
    target_losses = train_causal_lm(model, member_docs + replay, spec.target, pad_id=eos_id, seed=seed + 1,
                                    progress=phase("target"))
    model.save_pretrained(out / "target", safe_serialization=True)

    # The planted exposures count repeats within one pass; the target phase makes `epochs` passes.
    items = [dataclasses.replace(item, exposures=item.exposures * spec.target.epochs) for item in items]
    write_truth(items, out, spec=spec.plant, seed=seed, extra={
        "target_epochs": spec.target.epochs,
        "preset": spec.name, "calib_version": __version__,
        "background_documents": len(background_docs), "background_tokens": sum(map(len, background_docs)),
        "target_documents": len(member_docs) + n_replay, "replayed_documents": n_replay,
        "target_tokens": sum(map(len, member_docs)) + sum(map(len, replay)),
        "reference_final_loss": reference_losses[-1], "target_final_loss": target_losses[-1],
        "shape": dataclasses.asdict(shape),
    })
