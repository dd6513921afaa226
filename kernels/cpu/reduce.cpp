// CPU reference: reduce (placeholder until implemented)
