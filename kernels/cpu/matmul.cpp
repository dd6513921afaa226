// CPU reference: matmul (placeholder until implemented)
