//===- MLoptInlineAdvisor.h - LLVM's ML inline advisor + logging -*- C++ -*-===//
//
// Contract: LLVM's MLInlineAdvisor (its features, incremental module state
// and size guard, unchanged) -- or, as MLoptUpkeepInlineAdvisor (LLVM 19),
// FeatureUpkeepAdvisor: the same features with mlopt's cheaper upkeep of
// the caller's properties -- driven by an mlopt InlinePolicyRunner, which
// MakeRunner builds from the inputs LLVM hands over (19: the 38 features;
// 22: the 38, then IR2Vec's callee/caller embeddings when the module's
// IR2VecVocabAnalysis is cached). A factory that throws or returns null is
// reported as an error diagnostic and the HeuristicRunner decides.
// For every call site that reaches the model, the runner is told the stock
// heuristic's decision first. LogFor is asked once, with the final runner,
// for the training log (nullptr: none). Each decision is written when the
// inliner records it (after acting), in LLVM's development-mode layout: the
// runner's inputs, its extra outputs, then (when LogFor's log has that
// column, trainingLogFeatures(Runner, true)) callee_linkage, then
// inlining_default, inlining_decision; context "". Mandatory inlinings are
// neither evaluated nor logged, as in LLVM. No exception from the log
// reaches LLVM: a failing destination is one error diagnostic, the log is
// discarded (TrainingLogWriter), and compilation goes on without it.
// With a DecisionTrace, each logged decision is also appended to it, row
// for row with the log: '0'/'1' in Decisions and, when WantNames, the caller
// and callee (taken before the inliner acts, so a deleted callee is named).
// A DecisionTrace may also force decisions: the model's i-th decision of the
// compile is Forced[i] ('0'/'1') for i < Forced.size(), whatever the runner
// answers (the runner still evaluates, so its extra outputs are logged); the
// runner decides from there on (local search over decision sequences).
// ForcedCallees forces by name instead: every later site calling a function
// it names gets that function's decision (local search over callees: "never
// inline f", "inline f wherever the inliner asks").
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_MLOPTINLINEADVISOR_H
#define MLOPT_LLVM_MLOPTINLINEADVISOR_H

#include "FeatureUpkeepAdvisor.h"
#include "InlinePolicyRunner.h"
#include "TrainingLogWriter.h"

#include "llvm/Analysis/MLInlineAdvisor.h"

#include <functional>
#include <map>
#include <memory>

namespace mlopt {

using TrainingLogProvider =
    std::function<TrainingLogWriter *(llvm::LLVMContext &, const InlinePolicyRunner &)>;

/// The header specs of the development-mode log for a runner: its inputs,
/// its extra outputs, with CalleeLinkage callee_linkage (int64 [1],
/// calleeLinkageClass of the site's callee; not one of LLVM's columns),
/// inlining_default, inlining_decision.
std::vector<TensorSpec> trainingLogFeatures(const InlinePolicyRunner &Runner,
                                            bool CalleeLinkage = false);

/// Reports a training log that cannot be written as one error diagnostic:
/// "mlopt: cannot write training log 'PATH': No space left on device".
void reportTrainingLogFailure(llvm::LLVMContext &Ctx, const std::exception &E);

/// Runs Write (calls on Log) so that nothing throws into LLVM's frames: an
/// exception becomes one error diagnostic (the first failure of the
/// destination only; a failed log is skipped silently afterwards). Returns
/// whether Write completed.
bool writeTrainingLog(llvm::LLVMContext &Ctx, TrainingLogWriter &Log,
                      const std::function<void()> &Write) noexcept;

/// The logged decisions of one compile, in log order.
struct DecisionTrace {
  bool WantNames = false;
  std::string Decisions;                                  // '0' or '1' per decision
  std::vector<std::pair<std::string, std::string>> Sites; // (caller, callee), with WantNames
  std::string Forced; // '0'/'1': the first Forced.size() decisions, overriding the runner
  size_t Asked = 0;   // decisions asked of the model so far
  std::map<std::string, bool> ForcedCallees; // callee name -> decision, after Forced
};

template <class AdvisorBase, class AdviceBase>
class MLoptInlineAdvisorT final : public AdvisorBase {
public:
  MLoptInlineAdvisorT(llvm::Module &M, llvm::ModuleAnalysisManager &MAM,
                      const InlineRunnerFactory &MakeRunner,
                      std::function<bool(llvm::CallBase &)> DefaultAdvice,
                      const TrainingLogProvider &LogFor, DecisionTrace *Sites = nullptr);
  ~MLoptInlineAdvisorT() override;

protected:
  std::unique_ptr<AdviceBase> getAdviceFromModel(llvm::CallBase &CB,
                                                 llvm::OptimizationRemarkEmitter &ORE) override;

private:
  InlinePolicyRunner &Runner;
  TrainingLogWriter *Log = nullptr;
  bool LogsLinkage = false; // the log has callee_linkage before inlining_default
  DecisionTrace *Sites;
};

/// Over LLVM's MLInlineAdvisor (LLVM's feature upkeep).
using MLoptInlineAdvisor = MLoptInlineAdvisorT<llvm::MLInlineAdvisor, llvm::MLInlineAdvice>;
#if MLOPT_HAVE_FEATURE_UPKEEP
/// Over FeatureUpkeepAdvisor (mlopt's feature upkeep).
using MLoptUpkeepInlineAdvisor = MLoptInlineAdvisorT<FeatureUpkeepAdvisor, FeatureUpkeepAdvice>;
#endif

} // namespace mlopt

#endif
