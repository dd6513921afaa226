// ops: adamw (placeholder until implemented)
