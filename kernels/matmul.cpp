// ops: matmul (placeholder until implemented)
