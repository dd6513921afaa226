// ops: embedding (placeholder until implemented)
