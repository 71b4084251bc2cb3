//===- InlineFunctionLevels.h - MLInlineAdvisor's initial call-site heights -*- C++ -*-===//
//
// Contract: initialFunctionLevels(M, Visit) calls Visit(F, Level) once for
// every defined function F to which LLVM 19.1's and 22.1's MLInlineAdvisor
// constructor gives a level, with that level: the legacy CallGraph's SCCs
// reachable from its external calling node, bottom up, each SCC one more than
// the highest SCC its functions call directly (calls to defined functions),
// 0 for none. The graph is LLVM's: an edge per direct call and per callback
// function (!callback), and the roots are the functions that are not local
// or whose address is taken (callback and assume-like uses aside, llvm.used
// counting). Same levels and same set of functions, without building the
// CallGraph (its nodes, call records and value handles).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINEFUNCTIONLEVELS_H
#define MLOPT_LLVM_INLINEFUNCTIONLEVELS_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"

namespace mlopt {

void initialFunctionLevels(llvm::Module &M,
                           llvm::function_ref<void(llvm::Function &, unsigned)> Visit);

} // namespace mlopt

#endif
