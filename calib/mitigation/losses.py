"""The post-training objectives of the functional-memorization paper's Appendix H, on sequence log-probabilities.

Both compare the model being trained, π_θ, with the frozen target before post-training, π_ref, on whole
completions: ``log π(y | x)`` is the sum of the log-probabilities of the completion's tokens (the function's
body; the prompt's tokens are context, never scored; :func:`sequence_logps`).

- **NPO** (Zhang et al., 2024, *Negative Preference Optimization: From Catastrophic Collapse to Effective
  Unlearning*): ``L = (2/β) · log(1 + (π_θ(y_l|x) / π_ref(y_l|x))^β)`` on the memorized (rejected) body y_l,
  written as ``-(2/β) · log σ(-β · (log π_θ(y_l|x) - log π_ref(y_l|x)))``. Bounded below by 0; a sample
  stops pulling once its likelihood has dropped well below the reference's.
- **DPO** (Rafailov et al., 2023, *Direct Preference Optimization*): ``L = -log σ(β · [(log π_θ(y_w|x) -
  log π_ref(y_w|x)) - (log π_θ(y_l|x) - log π_ref(y_l|x))])`` with the preferred body y_w.

β = 0.1 in the paper for both. Each function returns the mean over the batch; tests check them against
the closed forms computed by hand on a toy model (tests/mitigation/test_losses.py).
"""

from __future__ import annotations

from typing import Any

__all__ = ["dpo_loss", "npo_loss", "sequence_logps"]


def sequence_logps(logits: Any, input_ids: Any, scored: Any) -> Any:
    """Per sequence, the sum of ``log p(token_t | tokens_<t)`` over the tokens where ``scored`` is true.

    ``logits`` is the model's output for ``input_ids`` (batch × length × vocabulary); ``scored`` (batch ×
    length, bool) marks the completion's tokens. Position 0 cannot be scored (nothing predicts it).
    """
    import torch

    logits = logits[:, :-1, :]
    if logits.dtype in (torch.float16, torch.bfloat16):  # half precision: the softmax in float32
        logits = logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    target = input_ids[:, 1:]
    picked = torch.gather(logp, 2, target.unsqueeze(-1)).squeeze(-1)
    return (picked * scored[:, 1:].to(picked.dtype)).sum(dim=-1)


def npo_loss(policy_rejected: Any, reference_rejected: Any, beta: float = 0.1) -> Any:
    """NPO's loss, the batch mean of ``-(2/β) log σ(-β (log π_θ(y_l) - log π_ref(y_l)))`` (module docstring)."""
    import torch.nn.functional as F

    ratio = policy_rejected - reference_rejected
    return (-(2.0 / beta) * F.logsigmoid(-beta * ratio)).mean()


def dpo_loss(policy_chosen: Any, policy_rejected: Any, reference_chosen: Any, reference_rejected: Any,
             beta: float = 0.1) -> Any:
    """DPO's loss: the batch mean of ``-log σ(β [(log π_θ(y_w) - log π_ref(y_w)) - (log π_θ(y_l) - log π_ref(y_l))])``.

    Arguments are the sequence log-probabilities (:func:`sequence_logps`) of the chosen and rejected bodies.
    """
    import torch.nn.functional as F

    margin = (policy_chosen - reference_chosen) - (policy_rejected - reference_rejected)
    return (-F.logsigmoid(beta * margin)).mean()
