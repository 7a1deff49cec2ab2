"""NPO's and DPO's objectives (calib/mitigation/losses.py) against their closed forms, computed by hand.

NPO (Zhang et al., 2024, eq. 3): L = (2/β) log(1 + (π_θ(y|x)/π_ref(y|x))^β); DPO (Rafailov et al., 2023, eq. 7):
L = -log σ(β[log π_θ(y_w)/π_ref(y_w) - log π_θ(y_l)/π_ref(y_l)]). The references below use plain floats and
math.log1p/exp, never torch; the toy model is a bigram table whose sequence probabilities are products of its
rows, multiplied out by hand.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from calib.mitigation.losses import dpo_loss, npo_loss, sequence_logps  # noqa: E402


def _npo(policy: float, reference: float, beta: float) -> float:
    return (2.0 / beta) * math.log1p(math.exp(beta * (policy - reference)))


def _dpo(pc: float, pr: float, rc: float, rr: float, beta: float) -> float:
    return math.log1p(math.exp(-beta * ((pc - rc) - (pr - rr))))


@pytest.mark.parametrize("beta", [0.1, 0.5, 2.0])
def test_npo_is_the_closed_form_batch_mean(beta):
    policy = [-10.0, -55.5, -3.25, -120.0]
    reference = [-10.0, -40.0, -9.0, -80.0]
    got = npo_loss(torch.tensor(policy, dtype=torch.float64), torch.tensor(reference, dtype=torch.float64), beta)
    want = sum(_npo(p, r, beta) for p, r in zip(policy, reference)) / len(policy)
    assert float(got) == pytest.approx(want, rel=1e-12)
    # at π_θ = π_ref every sample contributes (2/β) log 2
    same = npo_loss(torch.tensor([-7.0]), torch.tensor([-7.0]), beta)
    assert float(same) == pytest.approx(2.0 / beta * math.log(2.0), rel=1e-6)


@pytest.mark.parametrize("beta", [0.1, 1.0])
def test_dpo_is_the_closed_form_batch_mean(beta):
    pc, pr = [-20.0, -31.0, -5.5], [-12.0, -60.0, -5.0]
    rc, rr = [-25.0, -30.0, -5.5], [-11.0, -45.0, -6.0]
    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    got = dpo_loss(t(pc), t(pr), t(rc), t(rr), beta)
    want = sum(_dpo(*v, beta) for v in zip(pc, pr, rc, rr)) / 3
    assert float(got) == pytest.approx(want, rel=1e-12)
    assert float(dpo_loss(t([-3.0]), t([-4.0]), t([-3.0]), t([-4.0]), beta)) == pytest.approx(math.log(2.0))


class _Bigram(torch.nn.Module):
    """A toy causal LM: the logits at position t are a fixed row of a table, chosen by token t."""

    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(torch.tensor(table, dtype=torch.float64))

    def forward(self, ids):
        return self.table[ids]


def _softmax(row):
    z = sum(math.exp(v) for v in row)
    return [math.exp(v) / z for v in row]


TABLE = [[0.0, 1.0, -1.0, 0.5], [2.0, 0.0, 0.0, -2.0], [0.3, 0.3, 1.2, 0.0], [-1.0, 0.0, 1.0, 2.0]]


def test_sequence_logps_scores_the_completion_tokens_only():
    model = _Bigram(TABLE)
    # prompt [0, 3], completion [1, 2, 2] (then a pad the mask leaves out); second row: prompt [2], completion [3, 0]
    ids = torch.tensor([[0, 3, 1, 2, 2, 0], [2, 3, 0, 0, 0, 0]])
    scored = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]], dtype=torch.bool)
    got = sequence_logps(model(ids), ids, scored)
    p = [_softmax(r) for r in TABLE]
    want0 = math.log(p[3][1] * p[1][2] * p[2][2])  # 3 -> 1, 1 -> 2, 2 -> 2
    want1 = math.log(p[2][3] * p[3][0])  # 2 -> 3, 3 -> 0
    assert got.tolist() == pytest.approx([want0, want1], rel=1e-12)


def test_one_step_of_each_objective_moves_the_toy_model_the_way_the_paper_says():
    ids_l = torch.tensor([[0, 3, 1, 2]])  # the memorized completion [1, 2] after the prompt [0, 3]
    ids_w = torch.tensor([[0, 3, 0, 3]])  # a preferred completion [0, 3]
    scored = torch.tensor([[0, 0, 1, 1]], dtype=torch.bool)
    for method in ("npo", "dpo"):
        model = _Bigram(TABLE)
        with torch.no_grad():
            ref_l = sequence_logps(model(ids_l), ids_l, scored)
            ref_w = sequence_logps(model(ids_w), ids_w, scored)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        pol_l = sequence_logps(model(ids_l), ids_l, scored)
        if method == "npo":
            loss = npo_loss(pol_l, ref_l, 0.1)
        else:
            loss = dpo_loss(sequence_logps(model(ids_w), ids_w, scored), pol_l, ref_w, ref_l, 0.1)
        loss.backward()
        opt.step()
        with torch.no_grad():
            after_l = sequence_logps(model(ids_l), ids_l, scored)
            after_w = sequence_logps(model(ids_w), ids_w, scored)
        assert float(after_l) < float(ref_l)  # the memorized body got less likely
        if method == "dpo":
            assert float(after_w - after_l) > float(ref_w - ref_l)  # the preference margin grew
