"""Reference baselines for `tolk bench journey`: the case study's earlier architectures.

Comparisons only. Nothing here is used by `tolk serve`.
"""
