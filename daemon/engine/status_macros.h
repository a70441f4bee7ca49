// Early-return helpers for Result/Status inside the engine.
#pragma once

#include "common/result.h"

// Evaluates `expr` (a Result<T>); on error returns its Error from the enclosing
// function, otherwise moves the value into `lhs`.
#define MEDQ_ASSIGN_OR_RETURN(lhs, expr)                 \
  do {                                                   \
    auto medq_result_ = (expr);                          \
    if (!medq_result_.ok()) return medq_result_.error(); \
    lhs = std::move(medq_result_).value();               \
  } while (0)

// Evaluates `expr` (a Status); on error returns its Error.
#define MEDQ_RETURN_IF_ERROR(expr)                       \
  do {                                                   \
    auto medq_status_ = (expr);                          \
    if (!medq_status_.ok()) return medq_status_.error(); \
  } while (0)
