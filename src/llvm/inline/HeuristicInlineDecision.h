//===- HeuristicInlineDecision.h - The stock inliner's yes/no ---*- C++ -*-===//
//
// Contract: answers whether LLVM 19's default inline advisor would inline a
// call site (its cost model with the pass's InlineParams, profile summary
// when cached, and -inline-deferral), without emitting remarks. Used as the
// policy when no model is given and as the logged `inlining_default`.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_HEURISTICINLINEDECISION_H
#define MLOPT_LLVM_HEURISTICINLINEDECISION_H

#include "llvm/Analysis/InlineCost.h"
#include "llvm/IR/PassManager.h"

namespace mlopt {

bool heuristicInlineDecision(llvm::CallBase &CB, llvm::FunctionAnalysisManager &FAM,
                             const llvm::InlineParams &Params);

} // namespace mlopt

#endif
