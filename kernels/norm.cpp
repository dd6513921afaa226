// ops: norm (placeholder until implemented)
