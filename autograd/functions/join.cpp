// autograd: join (placeholder until implemented)
