// autograd: softmax (placeholder until implemented)
