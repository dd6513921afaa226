// CPU reference: conv (placeholder until implemented)
