// CPU reference: pool (placeholder until implemented)
