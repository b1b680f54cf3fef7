"""What the end of a training job prints and draws: the unigram baseline, the parsed training
log, the BPC plot and the fill-mask demo (``longformer-report``)."""
