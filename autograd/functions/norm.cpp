// autograd: norm (placeholder until implemented)
