// autograd: matmul (placeholder until implemented)
