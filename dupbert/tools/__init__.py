"""The tools a researcher reuses on any MLM: loading models, hidden states, the probe
and the lens through the MLM head, fitted translators, layer duplication and recursive
conversion, layer statistics (CKA), and the public sources of the domain corpora."""
