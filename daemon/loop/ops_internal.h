// The op handlers, grouped by file; ops.cc lists them in the op table.
#pragma once

#include "daemon/loop/ops.h"

namespace medq::daemon {

// ops_generate.cc
void GenerateOp(DaemonState& state, const Request& request, Responder reply);
void CancelOp(DaemonState& state, const Request& request, Responder reply);

// ops_models.cc
void ModelsOp(DaemonState& state, const Request& request, Responder reply);
void LoadOp(DaemonState& state, const Request& request, Responder reply);
void UnloadOp(DaemonState& state, const Request& request, Responder reply);
void TokenizeOp(DaemonState& state, const Request& request, Responder reply);
void DetokenizeOp(DaemonState& state, const Request& request, Responder reply);
void ApplyTemplateOp(DaemonState& state, const Request& request, Responder reply);

}  // namespace medq::daemon
