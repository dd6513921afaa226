// CPU reference: norm (placeholder until implemented)
