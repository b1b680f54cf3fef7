#!/usr/bin/env bash
# The paper's character-level Longformer on text8: 5 phases of doubling sequence length and
# windows (recipes/charlm_common.sh has the table and every setting), then the evaluation.
#
#   RAW=text8.zip DATA=data-bin/text8 recipes/charlm_text8.sh               # GPU, fp16
#   RAW=text8.zip DATA=data-bin/text8 DRY_RUN=1 recipes/charlm_text8.sh     # print the commands
#
# text8 (http://mattmahoney.net/dc/text8.zip) is prepared into DATA on the first run:
# characters a-z and space, 90M / 5M / 5M (longformer-preprocess-chars --format text8).
set -euo pipefail
CORPUS=text8
PREPARE_FORMAT=text8
# shellcheck source=charlm_common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/charlm_common.sh"
charlm_main
