// brigade::cuda — the hand-written CUDA kernels, one header per family, with exactly the signatures
// of their CPU reference twins in kernels/cpu/ (so BRIGADE_DISPATCH can call either). Each launches
// on the current stream of its tensors' device (core/cuda/current.h) and never synchronises.
//
// Contract, as for the CPU kernels: the op layer has checked shapes, dtypes and devices and allocated
// outputs. Unlike the CPU reference, CUDA kernels take bf16/f16 directly (accumulating in f32).
#pragma once

#include "kernels/cuda/copy.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/indices.h"
