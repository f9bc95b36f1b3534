"""Exceptions raised by dupbert. Each message names the bad value and says how to fix it."""


class DupbertError(Exception):
    """Base class of all dupbert errors."""


class ModelNotAvailable(DupbertError, LookupError):
    """A model name could not be resolved: not a zoo name, not a folder, not loadable from the Hub."""


class ChecksumMismatch(DupbertError, ValueError):
    """A downloaded file does not have the sha256 it is pinned to."""


class MLMHeadMissing(DupbertError, ValueError):
    """A checkpoint has no (or only part of its) MLM head weights, or the model has no MLM head.

    transformers would silently initialise a random head, and every RQ1 number would be fake.
    """
