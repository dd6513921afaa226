// ops: dropout (placeholder until implemented)
