// CPU reference: softmax (placeholder until implemented)
