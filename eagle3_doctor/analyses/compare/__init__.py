"""compare-hidden: the features the engine feeds the draft against those it was trained on, symbolically
(the capture points) and numerically (the tensors), named as findings with the fix."""
