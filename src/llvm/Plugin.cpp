// mlopt's pass plugin: provides MLGO's inline advisor to stock opt-19 and
// clang-19 through PluginInlineAdvisorAnalysis, with mlopt's model runners.
//
//   opt-19 -load-pass-plugin=P -mlopt-inline-training-log=x.log -passes='default<Oz>' ...
//   clang-19 -Oz -fpass-plugin=P -Xclang -load -Xclang P -mllvm -mlopt-... -c x.c
//
// Without any -mlopt-inline-* option the plugin registers nothing and the
// compiler behaves exactly as stock.

#include "HeuristicInlineDecision.h"
#include "InteractiveRunner.h"
#include "MLoptInlineAdvisor.h"

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"

#include <memory>

using namespace llvm;

namespace {

cl::OptionCategory Category("mlopt inliner options");

cl::opt<std::string> TrainingLogPath(
    "mlopt-inline-training-log", cl::value_desc("path"), cl::cat(Category),
    cl::desc("mlopt: write an MLGO training log of every inlining decision "
             "(LLVM's development-mode layout: 38 features, inlining_default, "
             "inlining_decision)"));

cl::opt<std::string> InteractiveBase(
    "mlopt-inline-interactive", cl::value_desc("base"), cl::cat(Category),
    cl::desc("mlopt: ask a host process for each inlining decision over "
             "<base>.out / <base>.in (LLVM's interactive protocol)"));

cl::opt<double> InteractiveTimeout(
    "mlopt-inline-interactive-timeout", cl::init(60.0), cl::value_desc("seconds"),
    cl::cat(Category),
    cl::desc("mlopt: if the host has not connected or replied within this "
             "time, or has closed the channel, warn once and finish with the "
             "default heuristic"));

cl::opt<bool> InteractiveIncludeDefault(
    "mlopt-inline-interactive-include-default", cl::init(false), cl::cat(Category),
    cl::desc("mlopt: append the heuristic's decision (inlining_default) as "
             "the last feature sent to the host"));

ModuleAnalysisManager *TheMAM = nullptr;

/// One log per compiler process; inliner sessions append to it.
mlopt::TrainingLogWriter *trainingLog(LLVMContext &Ctx,
                                      const mlopt::InlinePolicyRunner &Runner) {
  static std::unique_ptr<mlopt::TrainingLogWriter> Log;
  static bool Failed = false;
  if (Log || Failed || TrainingLogPath.empty())
    return Log.get();
  try {
    Log = std::make_unique<mlopt::TrainingLogWriter>(
        mlopt::FdSink::create(TrainingLogPath, /*Overwrite=*/true),
        mlopt::trainingLogFeatures(Runner));
    Log->switchContext("");
  } catch (const std::exception &E) {
    Failed = true;
    Ctx.emitError(Twine("mlopt: cannot write training log: ") + E.what());
  }
  return Log.get();
}

InlineAdvisor *advisorFactory(Module &M, FunctionAnalysisManager &FAM,
                              InlineParams Params, InlineContext IC) {
  if (!TheMAM)
    return new DefaultInlineAdvisor(M, FAM, Params, IC);
  std::unique_ptr<mlopt::InlinePolicyRunner> Runner;
  if (!InteractiveBase.empty())
    Runner = std::make_unique<mlopt::InteractiveRunner>(
        M.getContext(), InteractiveBase, InteractiveTimeout,
        InteractiveIncludeDefault);
  else
    Runner = std::make_unique<mlopt::HeuristicRunner>(M.getContext());
  mlopt::TrainingLogWriter *Log = trainingLog(M.getContext(), *Runner);
  auto Default = [&FAM, Params](CallBase &CB) {
    return mlopt::heuristicInlineDecision(CB, FAM, Params);
  };
  return new mlopt::MLoptInlineAdvisor(M, *TheMAM, std::move(Runner), Default,
                                       Log);
}

bool pluginActive() {
  return !TrainingLogPath.empty() || !InteractiveBase.empty();
}

void registerCallbacks(PassBuilder &PB) {
  PB.registerAnalysisRegistrationCallback([](ModuleAnalysisManager &MAM) {
    if (!pluginActive())
      return;
    TheMAM = &MAM;
    MAM.registerPass([] { return PluginInlineAdvisorAnalysis(advisorFactory); });
  });
}

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK __attribute__((visibility("default")))
::llvm::PassPluginLibraryInfo
llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "mlopt", "0.1.0", registerCallbacks};
}
