"""longformer_common: the bottom of the project's package order (docs/design.md).

Small, dependency-free utilities every other package may use: it imports only the standard
library, never torch, fairseq or another package of this project.

    atomic       writing files and folders so that no reader sees half of one; folder locks
    openmp       OpenMP's wait policy, set before torch loads (a busy machine's slowdown)
    provenance   the commit, machine (CPU model), date and load average of a measurement
"""
