// ops: reduce (placeholder until implemented)
