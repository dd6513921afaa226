// autograd: conv (placeholder until implemented)
