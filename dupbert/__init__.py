"""dupbert: companion library for Kao et al. (2020), "BERT's output layer recognizes all
hidden layers? Some Intriguing Phenomena and a simple way to boost BERT" (arXiv 2001.09309).

Public API (stable names scripts may rely on):
    load_mlm, load_encoder, random_init_control, mlm_head  -- models (zoo names, folders, Hub ids)
    reconstruction_accuracy, probe_models                  -- RQ1 probe
    masked_prediction_accuracy                             -- RQ1 masked prediction per layer
    lens                                                   -- RQ1 per-sequence lens view
    fit_translators, LinearTranslator, split_texts         -- learned lenses: linear (Din et al. 2023), tuned (Belrose et al. 2023)
    lens_html                                              -- the lens as interactive HTML
    load_texts, read_texts                                 -- corpora and any text file/dataset
    duplicate_layers                                       -- RQ3 layer duplication
    layer_similarity_report                                -- RQ2 layer statistics, CKA
    TASKS, load_task, finetune, sweep                      -- RQ3/RQ4 fine-tuning
    evaluate_ensemble, rq5_ensembles, rq5_summary,
    rq5_differences                                        -- RQ5 probability-sum ensembles

Submodules are imported on first use, so ``dupbert data download`` starts without torch.
"""

from importlib import import_module

from .core.errors import ChecksumMismatch, DupbertError, MLMHeadMissing, ModelNotAvailable

__version__ = "0.1.0"

_LAZY = {
    "ZOO": "core.zoo",
    "load_encoder": "tools.models",
    "load_mlm": "tools.models",
    "mlm_head": "tools.models",
    "random_init_control": "tools.models",
    "probe_models": "tools.probe",
    "reconstruction_accuracy": "tools.probe",
    "masked_prediction_accuracy": "tools.probe",
    "lens": "tools.lens",
    "fit_translators": "tools.translators",
    "LinearTranslator": "tools.translators",
    "split_texts": "tools.translators",
    "lens_html": "book.lens_figures",
    "load_texts": "core.data",
    "read_texts": "core.data",
    "duplicate_layers": "tools.duplicate",
    "TASKS": "training.tasks",
    "load_task": "training.tasks",
    "finetune": "training.finetuning",
    "sweep": "study.sweeps",
    "layer_similarity_report": "tools.stats",
    "evaluate_ensemble": "study.ensemble",
    "rq5_ensembles": "study.rq5",
    "rq5_summary": "study.rq5",
    "rq5_differences": "study.rq5",
}

__all__ = ["ChecksumMismatch", "DupbertError", "MLMHeadMissing", "ModelNotAvailable", *_LAZY]


def __getattr__(name: str):
    """A public name, its submodule imported on first use and the name then bound here, so that
    every later lookup gives the same object (no submodule of the package's own folder shares a
    public name: they live in the folders ``core``, ``tools``, ``training``, ``study`` and
    ``book``)."""
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dupbert' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API (``__all__``), lazy names included, for ``dir()`` and tab completion."""
    return sorted([*__all__, "__version__"])
