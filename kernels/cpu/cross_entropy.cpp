// CPU reference: cross_entropy (placeholder until implemented)
