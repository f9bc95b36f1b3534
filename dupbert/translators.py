"""Learned linear translators: an affine map from every hidden state to the last one.

Din, Karidi, Choshen & Geva (2023), "Jump to Conclusions" (arXiv 2303.09435), read ``h_l A_l``
through the model's own head instead of ``h_l``. Here the map is affine (``h_l W_l + b_l``),
fitted by ridge regression (float64, closed form, from streamed ``X^T X``, ``X^T Y``) on the
non-special positions of *unmasked* sequences (Din et al. fit BERT's at [MASK] positions); the
target is the last hidden state before any final norm. Each hidden state's ridge strength is
picked on held-out fitting sequences. A translator refuses to be evaluated on its fitting texts
(:meth:`LinearTranslator.check_held_out`).
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

from .checks import check_number
from .hidden import (batch_hidden_states, length_batches, mask_for_probe, pad_batch,
                     tokenize_for_probe)

__all__ = ["LinearTranslator", "fit_translators", "fit_affine", "split_texts", "TextSplit",
           "RIDGE_GRID"]

# Ridge strengths relative to the mean eigenvalue of the centred X^T X (scale-free): lambda =
# alpha * trace(X^T X) / H. The smallest is near least squares, the largest shrinks hard.
RIDGE_GRID = (1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
# "unmasked": every non-special position of unmasked inputs; "masked": only the masked positions
# of inputs with a seeded 15% masked (every chosen token -> mask token), as Din et al. fit BERT's
FIT_AT = ("unmasked", "masked")
FORMAT = "dupbert-linear-translator/1"


def _text_digest(text: str) -> str:
    """sha256 of one text, 16 hex digits: how a translator remembers its fitting texts."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class LinearTranslator:
    """Per hidden state ``l`` an affine map to the last hidden state, ``h_l @ weight[l] + bias[l]``
    (Din et al. 2023), from :func:`fit_translators`.

    Attributes:
        weight: float32 ``[L + 1, H, H]`` (row vectors).
        bias: float32 ``[L + 1, H]``.
        ridge: per hidden state, the chosen relative ridge strength (:func:`fit_affine`).
        validation_mse: per hidden state, the held-out mean squared error per value (hidden-state
            units squared) at that strength.
        identity_mse: the same for the identity map.
        n_tokens, n_sequences: fitting positions (non-special tokens) and sequences.
        fit_digests: :func:`_text_digest` of every fitting text.
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

    def __repr__(self) -> str:
        return (f"LinearTranslator({self.n_states} hidden states of size {self.weight.shape[1]}, "
                f"fitted on {self.n_sequences} sequences / {self.n_tokens} tokens, "
                f"ridge={self.ridge})")

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
        """Write to ``path``, a ``.pt`` of tensors, numbers and strings (``weights_only`` loadable).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"format": FORMAT, "weight": self.weight, "bias": self.bias,
                    "ridge": list(self.ridge), "validation_mse": list(self.validation_mse),
                    "identity_mse": list(self.identity_mse), "n_tokens": self.n_tokens,
                    "n_sequences": self.n_sequences,
                    "fit_digests": sorted(self.fit_digests), "fit_at": self.fit_at}, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> LinearTranslator:
        """Read a translator written by :meth:`save`.

        Raises:
            FileNotFoundError: no such file.
            ValueError: not a saved translator.
        """
        saved = torch.load(Path(path), map_location="cpu", weights_only=True)
        if not isinstance(saved, dict) or saved.get("format") != FORMAT:
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


@torch.inference_mode()
def _moments(model, tokenizer, texts, batch_size, max_length, device, progress,
             fit_at: str = "unmasked", mask_rate: float = 0.15, seed: int = 0) -> _Moments:
    """The statistics of every hidden state at the non-special positions of ``texts``, or
    (``fit_at="masked"``) at the masked positions of ``texts`` masked by ``mask_for_probe``."""
    examples = tokenize_for_probe(tokenizer, texts, max_length)
    if fit_at == "masked":
        examples = mask_for_probe(examples, tokenizer, mask_rate, "mask", seed)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    moments = _Moments(model.config.num_hidden_layers + 1, model.config.hidden_size)
    batches = length_batches([len(e["input_ids"]) for e in examples], batch_size)
    for batch_indices in tqdm(batches, desc="fit translators", unit="batch",
                              disable=not progress):
        batch = pad_batch([examples[i] for i in batch_indices], pad_id)
        counted = batch["counted"].to(device)
        moments.add([hidden[counted] for hidden in batch_hidden_states(model, batch, device)])
    return moments


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
) -> LinearTranslator:
    """Fit an affine map from every hidden state to the last one (Din et al. 2023), for
    ``reconstruction_accuracy``, ``masked_prediction_accuracy`` and ``lens`` (``translator=``).

    The last ``max(1, round(validation_fraction * n))`` texts pick each hidden state's strength
    from ``alphas`` by held-out MSE; the map is then refitted on all texts.

    Args:
        model, tokenizer: a ``*ForMaskedLM`` and its tokenizer (``dupbert.load_mlm``).
        texts: fitting sequences (at least 2), none of which may later be evaluated.
        validation_fraction: share of ``texts`` held out, in (0, 1).
        alphas: relative ridge strengths to try (:func:`fit_affine`), each >= 0.
        fit_at: ``"unmasked"`` (every non-special position of the unmasked texts) or ``"masked"``
            (the ``mask_rate`` of positions masked by ``mask_for_probe`` with ``seed``, every
            chosen token the mask token: Din et al.'s fit at [MASK] positions).

    Returns:
        A :class:`LinearTranslator`.

    Raises:
        ValueError: a bad argument (named in the message), or as ``tokenize_for_probe``.
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
    n_validation = min(len(texts) - 1, max(1, round(validation_fraction * len(texts))))
    positions = dict(fit_at=fit_at, mask_rate=mask_rate, seed=seed)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model = model.to(device).eval()
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
                            identity_mse, everything.n_tokens, len(texts),
                            frozenset(_text_digest(text) for text in texts), fit_at)
