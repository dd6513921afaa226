// ops: cross_entropy (placeholder until implemented)
