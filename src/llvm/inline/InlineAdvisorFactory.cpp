#include "InlineAdvisorFactory.h"
#include "HeuristicInlineDecision.h"
#include "IR2VecVocabulary.h"
#include "MLoptInlineAdvisor.h"
#include "PluginDiagnostic.h"

#include "llvm/IR/Module.h"
#if LLVM_VERSION_MAJOR >= 22
#include "llvm/Analysis/IR2Vec.h"
#endif

using namespace llvm;

namespace mlopt {

InlineAdvisor *makeInlineAdvisor(Module &M, FunctionAnalysisManager &FAM,
                                 ModuleAnalysisManager &MAM, const InlineParams &Params,
                                 InlineContext IC, const InlineRunnerFactory &MakeRunner,
                                 const TrainingLogProvider &LogFor, DecisionTrace *Sites,
                                 bool IR2Vec, InlineFeatures Features) {
  try { // called by LLVM: nothing may unwind through its frames
#if LLVM_VERSION_MAJOR >= 22
    // MLInlineAdvisor appends the embeddings iff the vocabulary is cached
    // (LLVM has reported an invalid one as an error diagnostic).
    if (IR2Vec)
      MAM.getResult<IR2VecVocabAnalysis>(M);
#else
    if (IR2Vec)
      M.getContext().diagnose(
          PluginDiagnostic(DS_Error, "mlopt: IR2Vec embeddings need LLVM 21 or later"));
#endif
    auto Default = [&FAM, Params](CallBase &CB) {
      return heuristicInlineDecision(CB, FAM, Params);
    };
#if MLOPT_HAVE_FEATURE_UPKEEP
    if (Features == InlineFeatures::Mlopt && !IR2Vec && featureUpkeepUnusableReason().empty())
      return new MLoptUpkeepInlineAdvisor(M, MAM, MakeRunner, Default, LogFor, Sites);
#else
    (void)Features;
#endif
    return new MLoptInlineAdvisor(M, MAM, MakeRunner, Default, LogFor, Sites);
  } catch (const std::exception &E) {
    M.getContext().diagnose(PluginDiagnostic(
        DS_Error, std::string("mlopt: cannot set up the inline advisor: ") + E.what()));
    return new DefaultInlineAdvisor(M, FAM, Params, IC);
  }
}

} // namespace mlopt
