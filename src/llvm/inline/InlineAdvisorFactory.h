//===- InlineAdvisorFactory.h - The one way mlopt builds an inline advisor -*- C++ -*-===//
//
// Contract: makeInlineAdvisor() builds the advisor that the pass plugin and
// the in-process compiler alike hand to LLVM's inliner: MLoptInlineAdvisor
// over `Runner` (the stock heuristic's HeuristicRunner when null), with the
// stock heuristic's answer (heuristicInlineDecision under the inliner's
// InlineParams) as the default advice, logging to the training log that
// `LogFor` returns for this runner (nullptr: no log). LogFor is called once
// per advisor, after the runner is final, so a log created there can carry
// the runner's extra outputs in its header. Callers differ only in where
// runners and logs come from (plugin: command-line options, one log file per
// process; engine: the caller's factory, one in-memory log per compile).
// Nothing unwinds into LLVM: if setting up fails, the failure is an error
// diagnostic and LLVM gets its default advisor.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINEADVISORFACTORY_H
#define MLOPT_LLVM_INLINEADVISORFACTORY_H

#include "InlinePolicyRunner.h"
#include "MLoptInlineAdvisor.h"
#include "TrainingLogWriter.h"

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/IR/PassManager.h"

#include <functional>
#include <memory>

namespace mlopt {

using TrainingLogProvider =
    std::function<TrainingLogWriter *(llvm::LLVMContext &, const InlinePolicyRunner &)>;

llvm::InlineAdvisor *makeInlineAdvisor(llvm::Module &M, llvm::FunctionAnalysisManager &FAM,
                                       llvm::ModuleAnalysisManager &MAM,
                                       const llvm::InlineParams &Params, llvm::InlineContext IC,
                                       std::unique_ptr<InlinePolicyRunner> Runner,
                                       const TrainingLogProvider &LogFor,
                                       DecisionTrace *Sites = nullptr);

} // namespace mlopt

#endif
