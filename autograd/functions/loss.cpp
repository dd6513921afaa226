// autograd: loss (placeholder until implemented)
