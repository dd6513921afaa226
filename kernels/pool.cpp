// ops: pool (placeholder until implemented)
