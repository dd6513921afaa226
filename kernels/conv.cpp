// ops: conv (placeholder until implemented)
