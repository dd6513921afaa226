// brigade — one include for the whole C++ API.
//
//   #include <brigade.h>
//   using namespace brigade;
//
// Layers, bottom up: core (Tensor, DType, Device, RNG) · autograd (Tape, differentiable functions,
// gradcheck) · nn (Module and layers) · optim (SGD, AdamW, schedules) · pipeline · text (the
// tokenizer, brigade::text) · data (token shards and their loader, brigade::data).
//
// Not included: the raw kernels, brigade::ops (kernels/ops.h). They are not differentiable, and
// ops::sum beside brigade::sum would let a gradient be cut without a word. Include "kernels/ops.h"
// by name to write a backward of your own (examples/custom_op.cpp does).
#pragma once

#include "core/cuda_graph.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "core/shape.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "autograd/graphed.h"
#include "autograd/tape.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "pipeline/pipeline.h"
#include "text/tokenizer.h"
#include "text/tokenizer_files.h"
#include "text/train.h"
#include "data/token_loader.h"
#include "data/token_shard.h"
