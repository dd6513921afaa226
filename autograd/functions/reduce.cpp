// autograd: reduce (placeholder until implemented)
