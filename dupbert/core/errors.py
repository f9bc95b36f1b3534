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


class DeviceNotAvailable(DupbertError, ValueError):
    """A device (``cuda``, ``cuda:1``, ``mps``, ...) that this machine's torch cannot use.

    Raised by ``dupbert.core.checks.check_device`` before anything is loaded; the message names the
    device, what torch reports and the devices that are available.
    """


class ParameterError(DupbertError, ValueError):
    """A notebook or command-line parameter with a value or a form that cannot be used.

    Raised by ``dupbert.study.params.notebook_parameters``; the message names every bad parameter, its
    value and the forms that work (``papermill -p``, ``-y``, ``-f``).
    """


class ConfigurationNotAvailable(DupbertError, ValueError):
    """A duplication configuration named for a model that does not have it (e.g. ``copy first 3``
    for a model with 2 blocks); the message lists the configurations that model has."""
