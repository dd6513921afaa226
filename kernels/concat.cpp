// ops: concat (placeholder until implemented)
