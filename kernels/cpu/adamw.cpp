// CPU reference: adamw (placeholder until implemented)
