"""dupbert: companion library for Kao et al. (2020), "BERT's output layer recognizes all
hidden layers? Some Intriguing Phenomena and a simple way to boost BERT" (arXiv 2001.09309).

Public API (stable names scripts may rely on):
    load_mlm, load_encoder, random_init_control  -- models (zoo names, folders, Hub ids)
    reconstruction_accuracy, probe_models        -- RQ1 probe
"""

from .errors import ChecksumMismatch, DupbertError, MLMHeadMissing, ModelNotAvailable
from .models import load_encoder, load_mlm, mlm_head, random_init_control
from .probe import probe_models, reconstruction_accuracy
from .zoo import ZOO

__version__ = "0.1.0"

__all__ = [
    "ZOO",
    "ChecksumMismatch",
    "DupbertError",
    "MLMHeadMissing",
    "ModelNotAvailable",
    "load_encoder",
    "load_mlm",
    "mlm_head",
    "probe_models",
    "random_init_control",
    "reconstruction_accuracy",
]
