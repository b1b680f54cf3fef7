"""``longformer-preprocess`` console script (see ``longformer-preprocess --help``)."""
from __future__ import annotations

import sys
from typing import List, Optional

from longformer_common.cli import one_line_errors

from .pipeline import preprocess



@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    preprocess(sys.argv[1:] if argv is None else argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
