// optim — optimizers, gradient clipping and learning-rate schedules (one include for all of it).
#pragma once

#include "optim/adamw.h"
#include "optim/captured_step.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
