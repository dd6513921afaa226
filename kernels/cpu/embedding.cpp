// CPU reference: embedding (placeholder until implemented)
