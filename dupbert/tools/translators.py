"""Learned linear translators: an affine map from every hidden state to the last one.

Two ways to fit the same map ``h_l W_l + b_l``, read through the model's own head instead of
``h_l``:

- ``method="ridge"``: Din, Karidi, Choshen & Geva (2023), "Jump to Conclusions" (arXiv
  2303.09435): the map regresses ``h_l`` onto the last hidden state (before any final norm) by
  ridge regression (float64, closed form, from streamed ``X^T X``, ``X^T Y``); each hidden state's
  ridge strength is picked on held-out fitting sequences.
- ``method="cross-entropy"``: the tuned lens of Belrose et al. (2023), "Eliciting Latent
  Predictions from Transformers with the Tuned Lens" (arXiv 2303.08112): the map starts at the
  identity and is trained by gradient descent *through the frozen MLM head* so that
  ``head(h_l W_l + b_l)`` matches the model's own output distribution ``head(h_L)``
  (loss ``KL(p_final || p_lens)``); each hidden state's number of epochs is picked on held-out
  fitting sequences. With ``target="token"`` the same map is trained by the cross-entropy of the
  token at each position instead (the input token at unmasked positions: what reconstruction
  scores; the hidden token at masked ones).

Both fit on the non-special positions of *unmasked* sequences or (``fit_at="masked"``) on the
masked positions of seeded-masked ones (Din et al. fit BERT's at [MASK] positions). A translator
refuses to be evaluated on its fitting texts (:meth:`LinearTranslator.check_held_out`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
import transformers
from tqdm import tqdm

from ..core.checks import check_number
from .hidden import (batch_hidden_states, length_batches, mask_for_probe, pad_batch,
                     tokenize_for_probe)

__all__ = ["LinearTranslator", "fit_translators", "fit_affine", "split_texts", "TextSplit",
           "lens_kl", "RIDGE_GRID", "METHODS", "FIT_AT", "TARGETS", "TRANSLATORS",
           "TRANSLATOR_FITS"]

# Ridge strengths relative to the mean eigenvalue of the centred X^T X (scale-free): lambda =
# alpha * trace(X^T X) / H. The smallest is near least squares, the largest shrinks hard.
RIDGE_GRID = (1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
# "unmasked": every non-special position of unmasked inputs; "masked": only the masked positions
# of inputs with a seeded 15% masked (every chosen token -> mask token), as Din et al. fit BERT's
FIT_AT = ("unmasked", "masked")
# "ridge": regression onto the last hidden state (Din et al. 2023); "cross-entropy": trained through
# the frozen head against the model's own output distribution (the tuned lens, Belrose et al. 2023)
METHODS = ("ridge", "cross-entropy")
# What "cross-entropy" trains against: "output", the model's own output distribution (KL, the tuned
# lens); "token", the token at the position (cross-entropy of the label)
TARGETS = ("output", "token")
# The tuned lens' fixed schedule (method="cross-entropy"): Adam from the identity, the learning
# rate decayed linearly to 0 over `TUNED_EPOCHS` passes over the fitting positions in seeded
# mini-batches of `TUNED_BATCH` positions. The weight's rate is `TUNED_LEARNING_RATE / H`: Adam
# moves every entry by about the rate, and the H entries of a column add up in h @ W.
TUNED_EPOCHS = 8
TUNED_LEARNING_RATE = 3e-2
TUNED_BATCH = 256
# The head's logits are computed for at most this many (position, vocabulary) entries at once
# (64 MB in fp32), as dupbert.tools.probe.LOGITS_BLOCK (a module above this one)
LOGITS_BLOCK = 1 << 24

TRANSLATORS = ("identity", "linear", "linear-masked", "tuned", "tuned-token")
"""``"identity"``: the head reads ``h_l`` itself (the paper); ``"linear"``: an affine map fitted by
ridge regression onto the last hidden state at every unmasked position (Din et al. 2023);
``"linear-masked"``: the same at masked positions; ``"tuned"``: the tuned lens (Belrose et al.
2023, arXiv 2303.08112), an affine map trained through the frozen head against the model's own
output distribution, at every unmasked position like ``"linear"``; ``"tuned-token"``: the same
map trained by the cross-entropy of the input token, what reconstruction scores
(``dupbert.fit_translators``' ``method``, ``fit_at`` and ``target``: :data:`TRANSLATOR_FITS`)."""

TRANSLATOR_FITS = {"linear": dict(method="ridge", fit_at="unmasked"),
                   "linear-masked": dict(method="ridge", fit_at="masked"),
                   "tuned": dict(method="cross-entropy", fit_at="unmasked"),
                   "tuned-token": dict(method="cross-entropy", fit_at="unmasked", target="token")}
"""How each fitted translator name is fitted: ``dupbert.fit_translators`` arguments."""
FORMAT = "dupbert-linear-translator/2"
# Formats `LinearTranslator.load` reads; /1 (before `method` and the KL fields) was ridge only.
READ_FORMATS = ("dupbert-linear-translator/1", FORMAT)


def _text_digest(text: str) -> str:
    """sha256 of one text, 16 hex digits: how a translator remembers its fitting texts."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class LinearTranslator:
    """Per hidden state ``l`` an affine map to the last hidden state's space,
    ``h_l @ weight[l] + bias[l]``, from :func:`fit_translators` (ridge: Din et al. 2023;
    cross-entropy: the tuned lens of Belrose et al. 2023).

    Attributes:
        weight: float32 ``[L + 1, H, H]`` (row vectors).
        bias: float32 ``[L + 1, H]``.
        ridge: ridge only: per hidden state, the chosen relative ridge strength
            (:func:`fit_affine`); empty for ``method="cross-entropy"``.
        validation_mse: per hidden state, the held-out mean squared error per value against the
            last hidden state (hidden-state units squared) of the chosen map.
        identity_mse: the same for the identity map.
        n_tokens, n_sequences: fitting positions (non-special tokens, or masked positions) and
            sequences.
        fit_digests: :func:`_text_digest` of every fitting text.
        fit_at: the positions fitted on, one of :data:`FIT_AT`.
        method: how it was fitted, one of :data:`METHODS` (files saved before the field existed:
            ``"ridge"``).
        epochs: cross-entropy only: per hidden state, the number of epochs whose map was kept (0:
            the identity); empty for ridge.
        target: cross-entropy only: what the maps were trained against, one of :data:`TARGETS`.
        validation_kl: cross-entropy only: per hidden state, the held-out mean over positions of
            the training loss of the kept map, in nats: ``KL(p_final || p_lens)`` (target
            ``"output"``; ``p_final`` the head's softmax on the last hidden state, ``p_lens`` on
            the mapped one; 0 at the last) or the cross-entropy of the position's token (target
            ``"token"``; at the last, the identity's); empty for ridge.
        identity_kl: the same for the identity map (the plain logit lens); empty for ridge.
    """

    weight: torch.Tensor
    bias: torch.Tensor
    ridge: list[float]
    validation_mse: list[float]
    identity_mse: list[float]
    n_tokens: int
    n_sequences: int
    fit_digests: frozenset[str] = field(default_factory=frozenset, repr=False)
    fit_at: str = "unmasked"  # the positions fitted on: FIT_AT
    method: str = "ridge"  # METHODS
    epochs: list[int] = field(default_factory=list)
    validation_kl: list[float] = field(default_factory=list)
    identity_kl: list[float] = field(default_factory=list)
    target: str = "output"  # TARGETS; cross-entropy only

    def __repr__(self) -> str:
        how = (f"ridge={self.ridge}" if self.method == "ridge"
               else f"cross-entropy against the {self.target}, epochs={self.epochs}")
        return (f"LinearTranslator({self.n_states} hidden states of size {self.weight.shape[1]}, "
                f"fitted on {self.n_sequences} sequences / {self.n_tokens} tokens "
                f"({self.fit_at}), {how})")

    @property
    def n_states(self) -> int:
        """Hidden states mapped, ``L + 1``."""
        return self.weight.shape[0]

    def apply(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden [..., H]`` of hidden state ``layer`` mapped to the last hidden state's
        space, same shape, dtype and device."""
        weight = self.weight[layer].to(hidden.device, torch.float32)
        bias = self.bias[layer].to(hidden.device, torch.float32)
        return (hidden.float() @ weight + bias).to(hidden.dtype)

    def check_model(self, model: transformers.PreTrainedModel) -> None:
        """Raise ValueError unless ``model`` has ``n_states`` hidden states of size ``H``."""
        states, hidden = model.config.num_hidden_layers + 1, model.config.hidden_size
        if (states, hidden) != (self.n_states, self.weight.shape[1]):
            raise ValueError(f"the translator maps {self.n_states} hidden states of size "
                             f"{self.weight.shape[1]}, the model has {states} of size {hidden}: "
                             f"fit one for this model (dupbert.fit_translators)")

    def check_held_out(self, texts: Sequence[str]) -> None:
        """ValueError if any of ``texts`` was a fitting text (:func:`split_texts`)."""
        used = [i for i, text in enumerate(texts) if _text_digest(text) in self.fit_digests]
        if used:
            raise ValueError(f"{len(used)} of {len(texts)} texts were used to fit the translator "
                             f"(the first is texts[{used[0]}]): evaluate it on held-out "
                             f"sequences only, e.g. dupbert.split_texts(texts, n_eval)")

    def save(self, path: str | Path) -> Path:
        """Write to ``path``, a ``.pt`` of tensors, numbers and strings (``weights_only`` loadable),
        format :data:`FORMAT`.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"format": FORMAT, "weight": self.weight, "bias": self.bias,
                    "ridge": list(self.ridge), "validation_mse": list(self.validation_mse),
                    "identity_mse": list(self.identity_mse), "n_tokens": self.n_tokens,
                    "n_sequences": self.n_sequences,
                    "fit_digests": sorted(self.fit_digests), "fit_at": self.fit_at,
                    "method": self.method, "epochs": list(self.epochs),
                    "validation_kl": list(self.validation_kl),
                    "identity_kl": list(self.identity_kl), "target": self.target}, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> LinearTranslator:
        """Read a translator written by :meth:`save`, of any format in :data:`READ_FORMATS` (one
        saved before ``method`` existed is a ridge translator).

        Raises:
            FileNotFoundError: no such file.
            ValueError: not a saved translator.
        """
        saved = torch.load(Path(path), map_location="cpu", weights_only=True)
        if not isinstance(saved, dict) or saved.get("format") not in READ_FORMATS:
            raise ValueError(f"{path} is not a translator saved by LinearTranslator.save "
                             f"(format {FORMAT})")
        saved.pop("format")
        saved["fit_digests"] = frozenset(saved["fit_digests"])
        return cls(**saved)


class TextSplit(NamedTuple):
    """Texts for fitting a translator and texts for evaluating it, disjoint."""

    fit: list[str]
    eval: list[str]


def split_texts(texts: Sequence[str], n_eval: int) -> TextSplit:
    """Deterministic split: the first ``n_eval`` texts for evaluation (those the identity probe with
    ``n_sequences=n_eval`` reads), the rest, less any also among them, for fitting.

    Raises:
        ValueError: ``n_eval`` not an integer >= 1, or no text left for fitting.
    """
    n_eval = check_number("n_eval", n_eval, integer=True, minimum=1)
    texts = list(texts)
    evaluation = texts[:n_eval]
    seen = set(evaluation)
    fit = [text for text in texts[n_eval:] if text not in seen]
    if not fit:
        raise ValueError(f"no text left to fit on: {len(texts)} texts, the first {n_eval} are for "
                         f"evaluation; give more texts (e.g. n_sequences + fit_sequences)")
    return TextSplit(fit, evaluation)


class _Moments:
    """Streamed float64 ``[x, 1]^T [x, 1]`` ``[S, H+1, H+1]``, ``[x, 1]^T y`` ``[S, H+1, H]`` and
    ``sum y^2`` of every hidden state ``x`` against the last one ``y``.
    """

    def __init__(self, n_states: int, hidden: int):
        self.gram = torch.zeros(n_states, hidden + 1, hidden + 1, dtype=torch.float64)
        self.cross = torch.zeros(n_states, hidden + 1, hidden, dtype=torch.float64)
        self.target_square = 0.0

    def add(self, states: Sequence[torch.Tensor]) -> None:
        """``states``: ``L + 1`` tensors ``[n, H]`` of the same positions."""
        target = states[-1].double().cpu()
        self.target_square += float((target ** 2).sum())
        for layer, hidden in enumerate(states):
            x = torch.cat([hidden.double().cpu(), target.new_ones(len(target), 1)], dim=1)
            self.gram[layer] += x.T @ x
            self.cross[layer] += x.T @ target

    @property
    def n_tokens(self) -> int:
        return int(self.gram[0, -1, -1])

    def __iadd__(self, other: _Moments) -> _Moments:
        self.gram += other.gram
        self.cross += other.cross
        self.target_square += other.target_square
        return self


def fit_affine(gram: torch.Tensor, cross: torch.Tensor, alphas: Sequence[float]
               ) -> list[torch.Tensor]:
    """Ridge regression ``y ~ x W + b`` from sufficient statistics, one solution per ``alpha``.

    Args:
        gram: ``[x, 1]^T [x, 1]``, ``[H+1, H+1]``.
        cross: ``[x, 1]^T y``, ``[H+1, H]``.
        alphas: relative strengths: ``lambda = alpha * trace(Xc^T Xc) / H``, ``Xc`` the centred
            ``x``; the bias is not penalised.

    Returns:
        Per ``alpha`` the stacked ``[W; b]``, float64 ``[H+1, H]``.
    """
    gram, cross = gram.double(), cross.double()
    n = gram[-1, -1]
    mean_x, mean_y = gram[-1, :-1] / n, cross[-1] / n
    centred_gram = gram[:-1, :-1] - n * torch.outer(mean_x, mean_x)  # Xc^T Xc
    centred_cross = cross[:-1] - n * torch.outer(mean_x, mean_y)  # Xc^T Yc
    eigenvalues, vectors = torch.linalg.eigh(centred_gram)
    eigenvalues = eigenvalues.clamp(min=0)
    scale = float(eigenvalues.mean())
    projected = vectors.T @ centred_cross
    solutions = []
    for alpha in alphas:
        denominator = eigenvalues + alpha * scale
        inverse = torch.where(denominator > 0, 1 / denominator.clamp(min=1e-300),
                              torch.zeros_like(denominator))
        weight = vectors @ (inverse[:, None] * projected)
        solutions.append(torch.cat([weight, (mean_y - mean_x @ weight)[None]]))
    return solutions


def _squared_error(solution: torch.Tensor, moments: _Moments, layer: int) -> float:
    """Sum of squared errors of ``[x, 1] @ solution`` against ``y`` from the moments (may round to a
    tiny negative number).
    """
    gram, cross = moments.gram[layer], moments.cross[layer]
    return float((solution * (gram @ solution)).sum() - 2 * (solution * cross).sum()
                 + moments.target_square)


def _chosen_positions(model, tokenizer, texts, batch_size, max_length, device, progress,
                      fit_at: str = "unmasked", mask_rate: float = 0.15, seed: int = 0):
    """Per batch of ``texts``, the ``L + 1`` hidden states ``[n, H]`` at the non-special positions
    of the unmasked texts, or (``fit_at="masked"``) at the masked positions of the texts masked by
    ``mask_for_probe`` (every chosen token the mask token), and the tokens ``[n]`` there (the
    input token, or the one masked). Run it under ``no_grad``."""
    examples = tokenize_for_probe(tokenizer, texts, max_length)
    if fit_at == "masked":
        examples = mask_for_probe(examples, tokenizer, mask_rate, "mask", seed)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    batches = length_batches([len(e["input_ids"]) for e in examples], batch_size)
    for batch_indices in tqdm(batches, desc="fit translators", unit="batch",
                              disable=not progress):
        batch = pad_batch([examples[i] for i in batch_indices], pad_id)
        counted = batch["counted"].to(device)
        yield ([hidden[counted] for hidden in batch_hidden_states(model, batch, device)],
               batch["labels"].to(device)[counted])


@torch.inference_mode()
def _moments(model, tokenizer, texts, batch_size, max_length, device, progress,
             fit_at: str = "unmasked", mask_rate: float = 0.15, seed: int = 0) -> _Moments:
    """The statistics of every hidden state at the positions of :func:`_chosen_positions`."""
    moments = _Moments(model.config.num_hidden_layers + 1, model.config.hidden_size)
    for states, _ in _chosen_positions(model, tokenizer, texts, batch_size, max_length, device,
                                       progress, fit_at, mask_rate, seed):
        moments.add(states)
    return moments


@torch.no_grad()
def _cached_states(model, tokenizer, texts, batch_size, max_length, device, progress,
                   fit_at: str = "unmasked", mask_rate: float = 0.15, seed: int = 0
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Every hidden state at the positions of :func:`_chosen_positions`, float32
    ``[L + 1, N, H]`` on ``device`` (``4 (L + 1) N H`` bytes), and the tokens there ``[N]``."""
    states, labels = [], []
    for hidden, tokens in _chosen_positions(model, tokenizer, texts, batch_size, max_length,
                                            device, progress, fit_at, mask_rate, seed):
        states.append(torch.stack([h.float() for h in hidden]))
        labels.append(tokens)
    return torch.cat(states, dim=1), torch.cat(labels)


def _log_probs(head: torch.nn.Module, hidden: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The head's float32 log-softmax ``[n, V]`` on ``hidden [n, H]`` (cast to the head's dtype)."""
    return torch.log_softmax(head(hidden.to(dtype)).float(), dim=-1)


def _kl_sum(head, hidden, target_log_probs, dtype) -> torch.Tensor:
    """``sum_n KL(p_target || p_lens)`` in nats, ``p_lens`` the head's softmax on ``hidden [n, H]``
    (several hidden states may be stacked into ``n``, ``target_log_probs`` repeated alike)."""
    return torch.nn.functional.kl_div(_log_probs(head, hidden, dtype), target_log_probs,
                                      reduction="sum", log_target=True)


def _loss_sum(head, hidden, target, dtype) -> torch.Tensor:
    """The tuned lens' loss summed over positions, in nats: :func:`_kl_sum` when ``target`` is
    log-probabilities ``[n, V]`` (float), else the cross-entropy of the tokens ``target [n]``
    (integer) under the head's softmax on ``hidden [n, H]``."""
    if target.is_floating_point():
        return _kl_sum(head, hidden, target, dtype)
    return torch.nn.functional.nll_loss(_log_probs(head, hidden, dtype), target, reduction="sum")


def _logits_chunk(n_states: int, vocab_size: int) -> int:
    """Positions per head call when ``n_states`` hidden states go through it together: at most
    ``LOGITS_BLOCK`` logits at once."""
    return max(1, LOGITS_BLOCK // (n_states * vocab_size))


@torch.no_grad()
def _mean_loss(head: torch.nn.Module, states: torch.Tensor, weight: torch.Tensor | None,
               bias: torch.Tensor | None, dtype: torch.dtype,
               labels: torch.Tensor | None = None) -> list[float]:
    """Per hidden state, the mean over positions of ``KL(p_final || p_lens)`` in nats, or (given
    ``labels``) of the cross-entropy of those tokens.

    Args:
        states: ``[L + 1, N, H]``; the last is read through the head unchanged (KL: the target).
        weight, bias: ``[L, H, H]`` and ``[L, H]`` for the first ``L`` states; ``None``: the
            identity.
        labels: ``[N]`` token ids, or ``None`` for KL.

    Returns:
        ``L + 1`` floats; the last is the last hidden state's own (KL: 0, read against itself).
    """
    n_maps, n = states.shape[0] - 1, states.shape[1]
    totals = torch.zeros(n_maps + 1, dtype=torch.float64)
    chunk = _logits_chunk(1, _head_vocab(head, states, dtype))
    for start in range(0, n, chunk):
        part = slice(start, start + chunk)
        target = _log_probs(head, states[-1, part], dtype) if labels is None else labels[part]
        for layer in range(n_maps):
            hidden = states[layer, part]
            if weight is not None:
                hidden = hidden @ weight[layer] + bias[layer]
            totals[layer] += float(_loss_sum(head, hidden, target, dtype))
        if labels is not None:
            totals[-1] += float(_loss_sum(head, states[-1, part], target, dtype))
    return (totals / n).tolist()


def _head_vocab(head: torch.nn.Module, states: torch.Tensor, dtype: torch.dtype) -> int:
    """The number of logits ``V`` the head gives (one position read)."""
    with torch.no_grad():
        return head(states[-1, :1].to(dtype)).shape[-1]


def _train_tuned(head: torch.nn.Module, train: torch.Tensor, held_out: torch.Tensor, *,
                 epochs: int, learning_rate: float, batch: int, seed: int, progress: bool,
                 labels: tuple[torch.Tensor, torch.Tensor] | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor, list[int], list[float], list[float]]:
    """The tuned lens' maps of the first ``L`` hidden states, trained on ``train`` and each kept
    at the epoch (0: the identity) of lowest held-out loss.

    Adam (weight rate ``learning_rate / H``, bias rate ``learning_rate``), decayed linearly to 0
    over ``epochs`` passes over ``train`` in mini-batches of ``batch`` positions, ordered by
    ``torch.randperm`` with a generator seeded by ``seed``. The loss is the sum over hidden states
    of the mean over the mini-batch of ``KL(p_final || p_lens)``, or with ``labels`` of the
    cross-entropy of the tokens; the head's parameters are not trained (their ``requires_grad`` is
    restored afterwards).

    Args:
        head: ``mlm_head(model)``.
        train, held_out: ``[L + 1, N, H]`` float32 (:func:`_cached_states`), ``N >= 1``.
        labels: ``(train tokens [N], held-out tokens [N'])``, or ``None`` for KL.

    Returns:
        ``weight [L, H, H]``, ``bias [L, H]`` (float32, on the states' device), per hidden state
        ``0..L`` the kept epoch, the held-out loss at it and the identity's (nats; last: the last
        hidden state's own).
    """
    n_states, n, hidden_size = train.shape
    dtype = next(head.parameters()).dtype
    n_maps = n_states - 1
    weight = torch.eye(hidden_size, device=train.device).repeat(n_maps, 1, 1).requires_grad_()
    bias = torch.zeros(n_maps, hidden_size, device=train.device, requires_grad=True)
    optimizer = torch.optim.Adam([{"params": [weight], "lr": learning_rate / hidden_size},
                                  {"params": [bias], "lr": learning_rate}])
    steps = epochs * math.ceil(n / batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
    generator = torch.Generator().manual_seed(seed)
    chunk = _logits_chunk(n_maps, _head_vocab(head, train, dtype))
    train_labels, held_labels = labels if labels is not None else (None, None)
    identity_kl = _mean_loss(head, held_out, None, None, dtype, held_labels)
    best_kl, kept = list(identity_kl), [0] * n_states
    best_weight, best_bias = weight.detach().clone(), bias.detach().clone()
    frozen = [(parameter, parameter.requires_grad) for parameter in head.parameters()]
    try:
        for parameter, _ in frozen:
            parameter.requires_grad_(False)
        for epoch in tqdm(range(1, epochs + 1), desc="tuned lens", unit="epoch",
                          disable=not progress):
            order = torch.randperm(n, generator=generator).to(train.device)
            for start in range(0, n, batch):
                positions = order[start:start + batch]
                for first in range(0, len(positions), chunk):
                    part = positions[first:first + chunk]
                    with torch.no_grad():
                        target = (_log_probs(head, train[-1, part], dtype).repeat(n_maps, 1)
                                  if train_labels is None else train_labels[part].repeat(n_maps))
                    mapped = torch.baddbmm(bias[:, None], train[:-1, part], weight)
                    loss = _loss_sum(head, mapped.reshape(-1, hidden_size), target,
                                     dtype) / len(positions)
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                schedule.step()
            kl = _mean_loss(head, held_out, weight.detach(), bias.detach(), dtype, held_labels)
            for layer in range(n_maps):
                if kl[layer] < best_kl[layer]:
                    best_kl[layer], kept[layer] = kl[layer], epoch
                    best_weight[layer] = weight[layer].detach()
                    best_bias[layer] = bias[layer].detach()
    finally:
        for parameter, requires_grad in frozen:
            parameter.requires_grad_(requires_grad)
    return best_weight, best_bias, kept, best_kl, identity_kl


def fit_translators(
    model: transformers.PreTrainedModel,
    tokenizer: transformers.PreTrainedTokenizerBase,
    texts: Sequence[str],
    validation_fraction: float = 0.2,
    alphas: Sequence[float] = RIDGE_GRID,
    batch_size: int = 32,
    max_length: int = 512,
    device: str | torch.device | None = None,
    progress: bool = False,
    fit_at: str = "unmasked",
    mask_rate: float = 0.15,
    seed: int = 0,
    method: str = "ridge",
    head: torch.nn.Module | None = None,
    epochs: int = TUNED_EPOCHS,
    learning_rate: float = TUNED_LEARNING_RATE,
    positions_per_step: int = TUNED_BATCH,
    target: str = "output",
) -> LinearTranslator:
    """Fit an affine map from every hidden state to the last one's space, for
    ``reconstruction_accuracy``, ``masked_prediction_accuracy`` and ``lens`` (``translator=``).

    The last ``max(1, round(validation_fraction * n))`` texts are held out:

    - ``method="ridge"`` (Din et al. 2023, arXiv 2303.09435): each hidden state's ridge strength
      is picked from ``alphas`` by held-out MSE against the last hidden state; the map is then
      refitted on all texts.
    - ``method="cross-entropy"`` (the tuned lens: Belrose et al. 2023, arXiv 2303.08112): every
      hidden state's map starts at the identity and is trained on the other texts by Adam through
      the frozen MLM head, loss ``KL(p_final || p_lens)`` with ``p_final`` the head's softmax on
      the last hidden state (the model's own output) and ``p_lens`` on the mapped one, for
      ``epochs`` seeded passes (:data:`TUNED_EPOCHS`, :data:`TUNED_LEARNING_RATE`,
      :data:`TUNED_BATCH`); each hidden state keeps the epoch (0: the identity) of lowest held-out
      KL, so its held-out KL is never above the identity's (the maps are not refitted on all
      texts: the held-out ones chose where to stop). ``target="token"`` trains and chooses by
      the cross-entropy of each position's token instead of the KL. The hidden states of the chosen
      positions are read once and cached (float32, ``4 (L + 1) N H`` bytes on ``device``); the
      target is recomputed from the cached last hidden state per mini-batch, and the head runs on
      at most :data:`LOGITS_BLOCK` logits at once. The last hidden state's map is exactly the
      identity (read through the head it *is* the target). Deterministic for a ``seed`` on one
      device and thread count.

    Args:
        model, tokenizer: a ``*ForMaskedLM`` and its tokenizer (``dupbert.load_mlm``).
        texts: fitting sequences (at least 2), none of which may later be evaluated.
        validation_fraction: share of ``texts`` held out, in (0, 1).
        alphas: ridge only: relative ridge strengths to try (:func:`fit_affine`), each >= 0.
        fit_at: ``"unmasked"`` (every non-special position of the unmasked texts) or ``"masked"``
            (the ``mask_rate`` of positions masked by ``mask_for_probe`` with ``seed``, every
            chosen token the mask token: Din et al.'s fit at [MASK] positions).
        seed: the masks (``fit_at="masked"``) and the order of the mini-batches.
        method: one of :data:`METHODS`.
        head: cross-entropy only, and needed there: the model's MLM head as one module,
            ``dupbert.mlm_head(model)`` (hidden state ``[n, H]`` to logits ``[n, V]``; frozen, its
            ``requires_grad`` restored afterwards).
        epochs, learning_rate, positions_per_step: cross-entropy only: passes over the fitting
            positions (integer >= 1), Adam's initial bias rate (> 0; the weight's is divided by
            ``H``) and positions per step (integer >= 1).
        target: cross-entropy only: one of :data:`TARGETS`, ``"output"`` (the model's own output
            distribution: the tuned lens) or ``"token"`` (the token at each position: the input
            token at unmasked positions, the hidden one at masked positions).

    Returns:
        A :class:`LinearTranslator` (its ``method`` and, for cross-entropy, ``epochs``,
        ``validation_kl`` and ``identity_kl`` say how it was fitted).

    Raises:
        ValueError: a bad argument (named in the message), cross-entropy without ``head``, no
            fitting position in the fitting or held-out texts (cross-entropy), or as
            ``tokenize_for_probe``.
    """
    texts = list(texts)
    if len(texts) < 2:
        raise ValueError(f"fit_translators needs at least 2 texts (fitting and held-out), got "
                         f"{len(texts)}")
    if isinstance(validation_fraction, bool) or not 0 < validation_fraction < 1:
        raise ValueError(f"validation_fraction must be in (0, 1), got {validation_fraction!r}")
    alphas = [float(alpha) for alpha in alphas]
    if not alphas or any(not math.isfinite(a) or a < 0 for a in alphas):
        raise ValueError(f"alphas must be finite numbers >= 0, at least one, got {alphas!r}")
    if fit_at not in FIT_AT:
        raise ValueError(f"fit_at must be one of {list(FIT_AT)}, got {fit_at!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    if target not in TARGETS:
        raise ValueError(f"target must be one of {list(TARGETS)}, got {target!r}")
    if target != "output" and method != "cross-entropy":
        raise ValueError(f"target={target!r} is what method='cross-entropy' trains against; "
                         f"method={method!r} regresses onto the last hidden state")
    if method == "cross-entropy":
        if not isinstance(head, torch.nn.Module):
            raise ValueError(f"method='cross-entropy' trains through the model's MLM head: pass "
                             f"head=dupbert.mlm_head(model), got head={type(head).__name__}")
        epochs = check_number("epochs", epochs, integer=True, minimum=1)
        learning_rate = check_number("learning_rate", learning_rate, above=0)
        positions_per_step = check_number("positions_per_step", positions_per_step,
                                          integer=True, minimum=1)
    n_validation = min(len(texts) - 1, max(1, round(validation_fraction * len(texts))))
    positions = dict(fit_at=fit_at, mask_rate=mask_rate, seed=seed)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model = model.to(device).eval()
    digests = frozenset(_text_digest(text) for text in texts)
    if method == "cross-entropy":
        return _fit_tuned(model, head, tokenizer, texts[:-n_validation], texts[-n_validation:],
                          digests, batch_size, max_length, device, progress, positions,
                          epochs=epochs, learning_rate=learning_rate, batch=positions_per_step,
                          seed=seed, target=target)
    train = _moments(model, tokenizer, texts[:-n_validation], batch_size, max_length, device,
                     progress, **positions)
    held_out = _moments(model, tokenizer, texts[-n_validation:], batch_size, max_length, device,
                        progress, **positions)
    n_values = held_out.n_tokens * model.config.hidden_size
    identity = torch.cat([torch.eye(model.config.hidden_size, dtype=torch.float64),
                          torch.zeros(1, model.config.hidden_size, dtype=torch.float64)])
    everything = _Moments(train.gram.shape[0], model.config.hidden_size)
    everything += train
    everything += held_out
    weights, biases, ridge, validation_mse, identity_mse = [], [], [], [], []
    for layer in range(train.gram.shape[0]):
        errors = [max(0.0, _squared_error(solution, held_out, layer)) / n_values
                  for solution in fit_affine(train.gram[layer], train.cross[layer], alphas)]
        best = min(range(len(alphas)), key=errors.__getitem__)
        solution = fit_affine(everything.gram[layer], everything.cross[layer], [alphas[best]])[0]
        weights.append(solution[:-1].float())
        biases.append(solution[-1].float())
        ridge.append(alphas[best])
        validation_mse.append(errors[best])
        identity_mse.append(max(0.0, _squared_error(identity, held_out, layer)) / n_values)
    return LinearTranslator(torch.stack(weights), torch.stack(biases), ridge, validation_mse,
                            identity_mse, everything.n_tokens, len(texts), digests, fit_at)


def _fit_tuned(model, head, tokenizer, fit_texts, held_out_texts, digests, batch_size,
               max_length, device, progress, positions, target="output",
               **training) -> LinearTranslator:
    """:func:`fit_translators` with ``method="cross-entropy"`` (arguments checked)."""
    train, train_labels = _cached_states(model, tokenizer, fit_texts, batch_size, max_length,
                                         device, progress, **positions)
    held_out, held_labels = _cached_states(model, tokenizer, held_out_texts, batch_size,
                                           max_length, device, progress, **positions)
    for name, states in (("fitting", train), ("held-out", held_out)):
        if states.shape[1] == 0:
            raise ValueError(f"the {name} texts have no position to fit at "
                             f"(fit_at={positions['fit_at']!r}): give longer or more texts")
    weight, bias, epochs, validation_kl, identity_kl = _train_tuned(
        head, train, held_out, progress=progress,
        labels=(train_labels, held_labels) if target == "token" else None, **training)
    hidden_size = train.shape[2]
    # the last hidden state is read through the head as it is (KL: it is the target): its map is
    # exactly the identity
    weight = torch.cat([weight, torch.eye(hidden_size, device=weight.device)[None]]).cpu()
    bias = torch.cat([bias, bias.new_zeros(1, hidden_size)]).cpu()
    with torch.no_grad():
        last = held_out[-1]
        validation_mse = [float(((held_out[layer] @ weight[layer].to(device)
                                  + bias[layer].to(device) - last) ** 2).mean())
                          for layer in range(held_out.shape[0])]
        identity_mse = [float(((held_out[layer] - last) ** 2).mean())
                        for layer in range(held_out.shape[0])]
    return LinearTranslator(weight, bias, [], validation_mse, identity_mse,
                            train.shape[1] + held_out.shape[1],
                            len(fit_texts) + len(held_out_texts), digests, positions["fit_at"],
                            method="cross-entropy", epochs=epochs, validation_kl=validation_kl,
                            identity_kl=identity_kl, target=target)


@torch.no_grad()
def lens_kl(
    model: transformers.PreTrainedModel,
    tokenizer: transformers.PreTrainedTokenizerBase,
    texts: Sequence[str],
    head: torch.nn.Module,
    translator: LinearTranslator | None = None,
    batch_size: int = 32,
    max_length: int = 512,
    device: str | torch.device | None = None,
    fit_at: str = "unmasked",
    mask_rate: float = 0.15,
    seed: int = 0,
) -> list[float]:
    """Per hidden state, the mean over positions of ``KL(p_final || p_lens)`` in nats: how far the
    head's softmax on hidden state ``l`` (mapped by ``translator``; ``None``: the identity, the
    plain logit lens) is from its softmax on the last hidden state (Belrose et al. 2023's
    measure). Any texts, fitting ones included (no :meth:`LinearTranslator.check_held_out`).

    Args:
        head: the model's MLM head, ``dupbert.mlm_head(model)``.
        fit_at, mask_rate, seed: the positions, as :func:`fit_translators`.

    Returns:
        ``L + 1`` floats >= 0 (up to rounding); the last is 0 when its map is the identity.

    Raises:
        ValueError: a translator for another shape of model, a bad ``fit_at``, no position, or as
            ``tokenize_for_probe``.
    """
    if fit_at not in FIT_AT:
        raise ValueError(f"fit_at must be one of {list(FIT_AT)}, got {fit_at!r}")
    if translator is not None:
        translator.check_model(model)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model = model.to(device).eval()
    states, _ = _cached_states(model, tokenizer, list(texts), batch_size, max_length, device,
                               False, fit_at, mask_rate, seed)
    if states.shape[1] == 0:
        raise ValueError(f"no position to read (fit_at={fit_at!r}) in {len(texts)} texts")
    dtype = next(head.parameters()).dtype
    if translator is None:
        return _mean_loss(head, states, None, None, dtype)
    weight, bias = translator.weight.to(device), translator.bias.to(device)
    kl = _mean_loss(head, states, weight[:-1], bias[:-1], dtype)
    last = states[-1] @ weight[-1] + bias[-1]
    kl[-1] = _mean_loss(head, torch.stack([last, states[-1]]), None, None, dtype)[0]
    return kl
