// CPU reference: dropout (placeholder until implemented)
