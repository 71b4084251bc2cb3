#include "MLoptInlineAdvisor.h"
#include "PluginDiagnostic.h"
#include "TensorSpecConversion.h"

#include "llvm/IR/Module.h"

#include <cstring>
#include <type_traits>

using namespace llvm;

namespace mlopt {

std::vector<mlopt::TensorSpec> trainingLogFeatures(const InlinePolicyRunner &Runner,
                                                   bool CalleeLinkage) {
  std::vector<mlopt::TensorSpec> Specs = Runner.inputs();
  for (const mlopt::TensorSpec &S : Runner.extraOutputs())
    Specs.push_back(S);
  if (CalleeLinkage)
    Specs.push_back(mlopt::TensorSpec(CalleeLinkageInput, TensorType::Int64, {1}));
  Specs.push_back(fromLLVM(DefaultDecisionSpec));
  Specs.push_back(fromLLVM(InlineDecisionSpec));
  return Specs;
}

void reportTrainingLogFailure(LLVMContext &Ctx, const std::exception &E) {
  std::string Text = "mlopt: cannot write training log";
  if (const auto *F = dynamic_cast<const FileError *>(&E))
    Text += " '" + F->path() + "': " + F->code().message();
  else
    Text += std::string(": ") + E.what();
  Ctx.diagnose(PluginDiagnostic(DS_Error, Text));
}

bool writeTrainingLog(LLVMContext &Ctx, TrainingLogWriter &Log,
                      const std::function<void()> &Write) noexcept {
  if (Log.failed())
    return false; // reported when it failed
  try {
    Write();
    return true;
  } catch (const std::exception &E) {
    if (Log.failed()) // the destination failed now: say it once
      reportTrainingLogFailure(Ctx, E);
    else
      Ctx.diagnose(PluginDiagnostic(DS_Error, std::string("mlopt: training log: ") + E.what()));
    return false;
  } catch (...) {
    Ctx.diagnose(PluginDiagnostic(DS_Error, "mlopt: training log: unknown error"));
    return false;
  }
}

namespace {
/// An advice (LLVM's MLInlineAdvice or mlopt's FeatureUpkeepAdvice) that
/// writes its observation once the inliner recorded it.
template <class AdvisorBase, class AdviceBase> class LoggingAdvice final : public AdviceBase {
public:
  LoggingAdvice(AdvisorBase *Advisor, CallBase &CB, OptimizationRemarkEmitter &ORE,
                bool Recommendation, int64_t Default, std::string Row, TrainingLogWriter &Log,
                DecisionTrace *Sites)
      : AdviceBase(Advisor, CB, ORE, Recommendation), Default(Default), Row(std::move(Row)),
        Log(Log), Sites(Sites) {
    if (Sites && Sites->WantNames) {
      Caller = CB.getCaller()->getName().str();
      if (const Function *Callee = CB.getCalledFunction())
        CalleeName = Callee->getName().str();
    }
  }

  void recordInliningImpl() override {
    AdviceBase::recordInliningImpl();
    log();
  }
  void recordInliningWithCalleeDeletedImpl() override {
    AdviceBase::recordInliningWithCalleeDeletedImpl();
    log();
  }
  void recordUnsuccessfulInliningImpl(const InlineResult &Result) override {
    AdviceBase::recordUnsuccessfulInliningImpl(Result);
    log();
  }
  void recordUnattemptedInliningImpl() override {
    AdviceBase::recordUnattemptedInliningImpl();
    log();
  }

private:
  void log() {
    if (writeTrainingLog(this->getCaller()->getContext(), Log, [&] { logUnguarded(); }) && Sites) {
      Sites->Decisions += this->isInliningRecommended() ? '1' : '0';
      if (Sites->WantNames)
        Sites->Sites.emplace_back(std::move(Caller), std::move(CalleeName));
    }
  }
  void logUnguarded() {
    Log.startObservation();
    const std::vector<mlopt::TensorSpec> &Specs = Log.features();
    size_t At = 0, Index = 0;
    for (; Index + 2 < Specs.size(); ++Index) {
      Log.logTensorValue(Index, Row.data() + At, Specs[Index].byteSize());
      At += Specs[Index].byteSize();
    }
    int64_t Decision = this->isInliningRecommended() ? 1 : 0;
    Log.logTensorValue(Index++, &Default, sizeof(Default));
    Log.logTensorValue(Index, &Decision, sizeof(Decision));
    Log.endObservation();
  }
  int64_t Default;
  std::string Row; // features and extra outputs, as evaluated
  TrainingLogWriter &Log;
  DecisionTrace *Sites;
  std::string Caller, CalleeName;
};
} // namespace

/// The runner for LLVM's input list; never throws (LLVM's frames are above).
static std::unique_ptr<MLModelRunner>
makeRunner(LLVMContext &Ctx, const InlineRunnerFactory &MakeRunner,
           const std::vector<llvm::TensorSpec> &Features) noexcept {
  std::unique_ptr<InlinePolicyRunner> Runner;
  try {
    if (MakeRunner)
      Runner = MakeRunner(Ctx, Features);
  } catch (const std::exception &E) {
    Ctx.diagnose(PluginDiagnostic(DS_Error, std::string("mlopt: ") + E.what()));
  } catch (...) {
    Ctx.diagnose(PluginDiagnostic(DS_Error, "mlopt: cannot make the inliner's model runner"));
  }
  if (!Runner)
    Runner = std::make_unique<HeuristicRunner>(Ctx, Features);
  return Runner;
}

namespace {
/// What AdvisorBase's constructor takes as the runner: LLVM 22's
/// MLInlineAdvisor builds it from the final feature list (the 38, plus
/// IR2Vec embeddings when the vocabulary analysis is cached); otherwise the
/// runner for the 38.
template <class AdvisorBase> auto runnerArgument(Module &M, const InlineRunnerFactory &MakeRunner) {
#if LLVM_VERSION_MAJOR >= 22
  if constexpr (std::is_same_v<AdvisorBase, MLInlineAdvisor>)
    return [&M, &MakeRunner](const std::vector<llvm::TensorSpec> &Features) {
      return makeRunner(M.getContext(), MakeRunner, Features);
    };
  else
#endif
    return makeRunner(M.getContext(), MakeRunner, inlinerFeatures());
}
} // namespace

template <class AdvisorBase, class AdviceBase>
MLoptInlineAdvisorT<AdvisorBase, AdviceBase>::MLoptInlineAdvisorT(
    Module &M, ModuleAnalysisManager &MAM, const InlineRunnerFactory &MakeRunner,
    std::function<bool(CallBase &)> DefaultAdvice, const TrainingLogProvider &LogFor,
    DecisionTrace *Sites)
    : AdvisorBase(M, MAM, runnerArgument<AdvisorBase>(M, MakeRunner), std::move(DefaultAdvice)),
      Runner(static_cast<InlinePolicyRunner &>(*this->ModelRunner)), Sites(Sites) {
  if (LogFor)
    Log = LogFor(M.getContext(), Runner);
  if (Log) {
    size_t Own = Runner.inputs().size() + Runner.extraOutputs().size();
    const std::vector<mlopt::TensorSpec> &Specs = Log->features();
    LogsLinkage = Specs.size() == Own + 3 && Specs[Own].name() == CalleeLinkageInput;
  }
}

template <class AdvisorBase, class AdviceBase>
MLoptInlineAdvisorT<AdvisorBase, AdviceBase>::~MLoptInlineAdvisorT() {
  if (Log)
    writeTrainingLog(this->M.getContext(), *Log, [&] { Log->flush(); });
}

template <class AdvisorBase, class AdviceBase>
std::unique_ptr<AdviceBase>
MLoptInlineAdvisorT<AdvisorBase, AdviceBase>::getAdviceFromModel(CallBase &CB,
                                                                 OptimizationRemarkEmitter &ORE) {
  // The heuristic's decision is computed only if the runner or the log asks
  // for it (a shipped policy does not pay the heuristic's cost analysis).
  auto Heuristic = [&] { return this->GetDefaultAdvice(CB); };
  Runner.askDefaultWith(Heuristic);
  Runner.tellCallee(CB.getCalledFunction());
  bool Decision = Runner.evaluate<int64_t>() != 0;
  if (Sites && Sites->Asked < Sites->Forced.size()) {
    Decision = Sites->Forced[Sites->Asked] == '1';
  } else if (Sites && !Sites->ForcedCallees.empty()) {
    if (const Function *Callee = CB.getCalledFunction()) {
      auto It = Sites->ForcedCallees.find(Callee->getName().str());
      if (It != Sites->ForcedCallees.end())
        Decision = It->second;
    }
  }
  if (Sites)
    ++Sites->Asked;
  int64_t Default = Log ? Runner.defaultDecision() : 0;
  Runner.askDefaultWith({});
  if (!Log)
    return std::make_unique<AdviceBase>(this, CB, ORE, Decision);
  std::string Row;
  for (size_t I = 0; I < Runner.inputs().size(); ++I)
    Row.append(static_cast<const char *>(Runner.getTensorUntyped(I)),
               Runner.inputs()[I].byteSize());
  const std::vector<mlopt::TensorSpec> &Extras = Runner.extraOutputs();
  for (size_t I = 0; I < Extras.size(); ++I)
    Row.append(static_cast<const char *>(Runner.extraOutputData(I)), Extras[I].byteSize());
  if (LogsLinkage) {
    int64_t Linkage = Runner.calleeLinkage();
    Row.append(reinterpret_cast<const char *>(&Linkage), sizeof(Linkage));
  }
  return std::make_unique<LoggingAdvice<AdvisorBase, AdviceBase>>(this, CB, ORE, Decision, Default,
                                                                  std::move(Row), *Log, Sites);
}

template class MLoptInlineAdvisorT<MLInlineAdvisor, MLInlineAdvice>;
#if MLOPT_HAVE_FEATURE_UPKEEP
template class MLoptInlineAdvisorT<FeatureUpkeepAdvisor, FeatureUpkeepAdvice>;
#endif

} // namespace mlopt
