//===- InlineAdvisorFactory.h - The one way mlopt builds an inline advisor -*- C++ -*-===//
//
// Contract: makeInlineAdvisor() builds the advisor that the pass plugin and
// the in-process compiler alike hand to LLVM's inliner: MLoptInlineAdvisor
// with runners from MakeRunner (the stock heuristic's HeuristicRunner when
// empty), with the stock heuristic's answer (heuristicInlineDecision under
// the inliner's InlineParams) as the default advice, logging to the
// training log that `LogFor` returns for the runner (nullptr: no log).
// LogFor is called once per advisor, after the runner is final, so a log
// created there carries the runner's inputs and extra outputs in its
// header. With IR2Vec (LLVM 22 only), the module's IR2VecVocabAnalysis is
// computed first, so LLVM appends the callee/caller embeddings to the
// runner's inputs; the caller must have checked that the vocabulary loads
// (an invalid one is an error diagnostic and no embeddings). Callers differ
// only in where runners and logs come from (plugin: command-line options,
// one log file per process; engine: the caller's factory, one in-memory log
// per compile). Nothing unwinds into LLVM: if setting up fails, the failure
// is an error diagnostic and LLVM gets its default advisor.
// Features picks who keeps the caller's properties up to date after each
// inlining (the values are the same): InlineFeatures::Mlopt uses mlopt's
// FeatureUpkeepAdvisor where featureUpkeepUnusableReason() allows it and
// without IR2Vec, LLVM's MLInlineAdvisor otherwise; InlineFeatures::LLVM
// always uses LLVM's.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINEADVISORFACTORY_H
#define MLOPT_LLVM_INLINEADVISORFACTORY_H

#include "InlineFeatures.h"
#include "InlinePolicyRunner.h"
#include "MLoptInlineAdvisor.h"
#include "TrainingLogWriter.h"

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/IR/PassManager.h"

namespace mlopt {

llvm::InlineAdvisor *makeInlineAdvisor(llvm::Module &M, llvm::FunctionAnalysisManager &FAM,
                                       llvm::ModuleAnalysisManager &MAM,
                                       const llvm::InlineParams &Params, llvm::InlineContext IC,
                                       const InlineRunnerFactory &MakeRunner,
                                       const TrainingLogProvider &LogFor,
                                       DecisionTrace *Sites = nullptr, bool IR2Vec = false,
                                       InlineFeatures Features = InlineFeatures::Mlopt);

} // namespace mlopt

#endif
