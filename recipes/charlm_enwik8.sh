#!/usr/bin/env bash
# The paper's character-level Longformer on enwik8: 5 phases of doubling sequence length and
# windows (recipes/charlm_common.sh has the table and every setting), then the evaluation.
#
#   RAW=enwik8.zip DATA=data-bin/enwik8 recipes/charlm_enwik8.sh            # GPU, fp16
#   RAW=enwik8.zip DATA=data-bin/enwik8 DRY_RUN=1 recipes/charlm_enwik8.sh  # print the commands
#
# enwik8 (http://mattmahoney.net/dc/enwik8.zip) is prepared into DATA on the first run: raw
# bytes, each byte a token, 90M / 5M / 5M (longformer-preprocess-chars --format enwik8).
set -euo pipefail
CORPUS=enwik8
PREPARE_FORMAT=enwik8
# shellcheck source=charlm_common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/charlm_common.sh"
charlm_main
