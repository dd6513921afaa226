// ops: softmax (placeholder until implemented)
