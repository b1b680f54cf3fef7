"""longformer_common: the bottom of the project's package order (docs/design.md).

Small, dependency-free utilities every other package may use: it needs only the standard
library, never torch, fairseq or another package of this project (errors.py takes hydra's
CompactHydraException as a base when hydra is installed, for fairseq-hydra-train's one line).

    atomic       writing files and folders so that no reader sees half of one; folder locks
    flags        plain typed command-line flags from their defaults
    free_cores   how many of this process's cores other processes leave free (/proc/stat)
    threads      the thread policy: --threads N / OMP_NUM_THREADS win, else auto (free cores)
    provenance   the commit, machine (CPU model), date and load average of a measurement
    errors       UserInputError: a bad input the user can fix (re-exported by fairseq_longformer)
    cli          one_line_errors: every console script's main reports bad input in one line, exit 2
    results      a results page and its record (NAME.json, NAME.md), stamped with provenance
"""
