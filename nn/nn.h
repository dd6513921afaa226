// brigade::nn — modules and layers, up to a GPT. See docs/nn.md.
#pragma once

#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/conv.h"
#include "nn/embedding.h"
#include "nn/gpt.h"
#include "nn/gpt2_hf.h"
#include "nn/grouped_attention.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/norm.h"
#include "nn/rotary.h"
#include "nn/sequential.h"
#include "nn/swiglu.h"
#include "nn/transformer.h"
