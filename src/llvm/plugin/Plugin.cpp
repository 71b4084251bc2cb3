// mlopt's pass plugin: provides MLGO's inline advisor to stock opt and
// clang (19 or 22; one build per major) through PluginInlineAdvisorAnalysis,
// with mlopt's model runners. On 22, -mlopt-inline-ir2vec-vocab=FILE adds
// LLVM's IR2Vec callee/caller embeddings to the inliner's inputs.
//
//   opt-19 -load-pass-plugin=P -mlopt-inline-training-log=x.log -passes='default<Oz>' ...
//   clang-19 -Oz -fpass-plugin=P -Xclang -load -Xclang P -mllvm -mlopt-... -c x.c
//
// Training logs are never replaced silently: an existing log is an error
// unless -mlopt-inline-training-log-overwrite. In a build, give each
// translation unit its own log with a directory (a path ending in '/') or a
// pattern with %m (the module's source file, see TrainingLogPath.h).
//
// Register-allocation eviction (LLVM 19 builds with LLVM's private headers):
//   llc-19 -load=P -mlopt-regalloc-model=policy.so x.ll
//   llc-19 -load=P -mlopt-regalloc-training-log=x.evict.log x.ll
//   clang-19 -O2 -fpass-plugin=P -mllvm -mlopt-regalloc-model=... -c x.c
// LLVM's own ML eviction advisor extracts the features; mlopt's policy
// answers in-process; invalid replies get the default advisor's choice.
//
// In lld's LTO backends (full LTO and ThinLTO, LLVM 19 and 22), load the
// plugin twice: -mllvm -load=P first, so that lld's command line knows its
// options (lld parses -mllvm before it loads pass plugins), then
// --load-pass-plugin=P, which runs it:
//   ld.lld-19 -mllvm -load=P -mllvm -mlopt-inline-training-log=logs/ --load-pass-plugin=P ...
//   clang-19 -flto -fuse-ld=lld -Wl,-mllvm,-load=P -Wl,-mllvm,-mlopt-... -Wl,--load-pass-plugin=P
//   ...
// At link time a module's logs, replay files and interactive channels (%m)
// are named after the link's output (TrainingLogPath.h): logs/libz.so.lto.log
// for a full-LTO link, logs/libz.so.thinlto/<source>.log per ThinLTO backend.
// ThinLTO backends run in parallel threads: every piece of per-process state
// here is guarded, the policy is a pool (one instance per concurrent
// backend), and two modules never share a log.
//
// Without any -mlopt-* option the plugin registers nothing and the compiler
// behaves exactly as stock.

#include "CalleeDecisions.h"
#include "DecisionString.h"
#include "Errors.h"
#include "IR2VecVocabulary.h"
#include "InlineAdvisorFactory.h"
#include "InlineFeatures.h"
#include "InteractiveRunner.h"
#include "LLVMOption.h"
#include "LTOModuleSaver.h"
#include "LinkCommandLine.h"
#include "MLoptInlineAdvisor.h"
#include "PassModule.h"
#include "PluginDiagnostic.h"
#include "PolicyModelPool.h"
#include "PolicyModelRunner.h"
#include "TensorSpecConversion.h"
#include "TrainingLogPath.h"
#ifdef MLOPT_HAVE_REGALLOC
#include "EvictionAdvisorInstall.h"
#endif

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#if LLVM_VERSION_MAJOR >= 22
#include "llvm/Plugins/PassPlugin.h"
#else
#include "llvm/Passes/PassPlugin.h"
#endif
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <mutex>

using namespace llvm;

namespace {

cl::OptionCategory Category("mlopt inliner options");

cl::opt<std::string>
    TrainingLogPath("mlopt-inline-training-log", cl::value_desc("path"), cl::cat(Category),
                    cl::desc("mlopt: write an MLGO training log of every inlining decision "
                             "(LLVM's development-mode layout: 38 features, inlining_default, "
                             "inlining_decision). A path ending in '/' is a directory that gets "
                             "one <module>.log per translation unit; %m in the path is replaced "
                             "by the module's source file (slashes as '_'), %p by the process id"));

cl::opt<bool> TrainingLogOverwrite("mlopt-inline-training-log-overwrite", cl::init(false),
                                   cl::cat(Category),
                                   cl::desc("mlopt: replace an existing training log (default: "
                                            "an existing log is an error)"));

cl::opt<bool> TrainingLogCalleeLinkage(
    "mlopt-inline-log-callee-linkage", cl::init(false), cl::cat(Category),
    cl::desc("mlopt: the training log also has callee_linkage (int64, before inlining_default): "
             "the callee's linkage class, 0 external, 1 local, 2 linkonce, "
             "3 available_externally, 4 other (the inlining-linkage problem's 40th input)"));

cl::opt<std::string>
    ModelPath("mlopt-inline-model", cl::value_desc("path"), cl::cat(Category),
              cl::desc("mlopt: the inlining policy: a .tflite file, a model directory "
                       "(model.tflite + output_spec.json) or a compiled policy .so"));

cl::opt<std::string> FeedPrefix("mlopt-inline-model-feed-prefix", cl::init("action_"),
                                cl::value_desc("prefix"), cl::cat(Category),
                                cl::desc("mlopt: prefix of the model's input tensor names (LLVM's "
                                         "-ml-inliner-trained-model-feed-prefix)"));

cl::opt<std::string>
    LiteRtLibrary("mlopt-litert-library", cl::value_desc("path"), cl::cat(Category),
                  cl::desc("mlopt: LiteRT runtime to run .tflite policies with (default: "
                           "$MLOPT_LITERT_LIBRARY, else ai_edge_litert/libLiteRt.so next to "
                           "the mlopt package)"));

// For measurement: the cost of LLVM's ML advisor (feature extraction) and of
// evaluating a model, each without changing any decision.
cl::opt<bool> ForceMLAdvisor("mlopt-inline-ml-advisor", cl::init(false), cl::Hidden,
                             cl::cat(Category),
                             cl::desc("mlopt: use LLVM's ML inline advisor with the heuristic's "
                                      "decisions even without a model, channel or log"));

cl::opt<bool>
    ModelShadow("mlopt-inline-model-shadow", cl::init(false), cl::Hidden, cl::cat(Category),
                cl::desc("mlopt: evaluate -mlopt-inline-model at every decision but apply "
                         "the heuristic's decision"));

cl::opt<std::string> ReplayPath(
    "mlopt-inline-replay", cl::value_desc("path"), cl::cat(Category),
    cl::desc("mlopt: force the inliner's first decisions to this file's '0'/'1' characters, "
             "in the order the inliner asks (%m: per module, as the training log); the model "
             "or heuristic decides the rest. A decision string from `mlopt train search`, or "
             "the heuristic's own (to measure a policy's cost with stock decisions)"));

cl::opt<std::string> CalleeDecisionsPath(
    "mlopt-inline-callee-decisions", cl::value_desc("path"), cl::cat(Category),
    cl::desc("mlopt: every site calling a function this file names gets its decision, whatever "
             "the model or heuristic says: one \"<0|1> <callee name>\" per line (after "
             "-mlopt-inline-replay's decisions). %m: per module, as the training log (a module "
             "whose file does not exist keeps its own decisions); `mlopt tune` writes one per "
             "binary, `mlopt corpus call-sites --callee-decisions` a package's"));

cl::opt<std::string>
    InteractiveBase("mlopt-inline-interactive", cl::value_desc("base"), cl::cat(Category),
                    cl::desc("mlopt: ask a host process for each inlining decision over "
                             "<base>.out / <base>.in (LLVM's interactive protocol)"));

cl::opt<double>
    InteractiveTimeout("mlopt-inline-interactive-timeout", cl::init(60.0),
                       cl::value_desc("seconds"), cl::cat(Category),
                       cl::desc("mlopt: if the host has not connected or replied within this "
                                "time, or has closed the channel, warn once and finish with the "
                                "default heuristic"));

cl::opt<bool> InteractiveIncludeDefault(
    "mlopt-inline-interactive-include-default", cl::init(false), cl::cat(Category),
    cl::desc("mlopt: append the heuristic's decision (inlining_default) as "
             "the last feature sent to the host"));

cl::opt<std::string> IR2VecVocab(
    "mlopt-inline-ir2vec-vocab", cl::value_desc("file"), cl::cat(Category),
    cl::desc("mlopt: LLVM 21+: an IR2Vec vocabulary (seed-embedding JSON); the inliner's "
             "inputs, logs and policies then carry callee_embedding and caller_embedding "
             "(LLVM's -ml-inliner-ir2vec-vocab-file with -ir2vec-vocab-path is honoured too)"));

cl::opt<mlopt::InlineFeatures> InlineFeatures(
    "mlopt-inline-features", cl::init(mlopt::InlineFeatures::Mlopt), cl::cat(Category),
    cl::desc("mlopt: who keeps the inliner's 38 features up to date after each inlining "
             "(the values are the same)"),
    cl::values(clEnumValN(mlopt::InlineFeatures::Mlopt, "mlopt",
                          "mlopt's upkeep (LLVM 19 and 22 without IR2Vec; LLVM's otherwise)"),
               clEnumValN(mlopt::InlineFeatures::LLVM, "llvm",
                          "LLVM's MLInlineAdvisor (recomputes the caller's dominator tree and "
                          "loop info after every inlining)")));

cl::opt<std::string> SaveLTOModules(
    "mlopt-save-lto-modules", cl::value_desc("dir"), cl::cat(Category),
    cl::desc("mlopt: in lld's LTO backends, save each module as LTO is about to optimize it "
             "(a full-LTO link's merged module; each ThinLTO backend's post-import module) to "
             "<dir>/<name>.bc with the link's facts in <name>.link.json, named as link-time logs "
             "(<output>.lto, <output>.thinlto/<source>): an LTO corpus for mlopt corpus extract "
             "--lto. Decisions are not changed by it"));

cl::OptionCategory RegallocCategory("mlopt regalloc options");

cl::opt<std::string> RegallocModel(
    "mlopt-regalloc-model", cl::value_desc("path"), cl::cat(RegallocCategory),
    cl::desc("mlopt: the register-allocation eviction policy (.tflite, model directory or "
             "compiled .so; decision index_to_evict) over LLVM's own eviction features"));

cl::opt<std::string> RegallocLogPath(
    "mlopt-regalloc-training-log", cl::value_desc("path"), cl::cat(RegallocCategory),
    cl::desc("mlopt: write an MLGO training log of every eviction decision (LLVM's "
             "development-mode layout: 21 features, index_to_evict, reward = the function's "
             "RegAllocScore); without -mlopt-regalloc-model the default advisor decides. In lld, "
             "%m is the link-time module (one log per ThinLTO backend: logs/%m.log)"));

cl::opt<bool> RegallocLogOverwrite("mlopt-regalloc-training-log-overwrite", cl::init(false),
                                   cl::cat(RegallocCategory),
                                   cl::desc("mlopt: replace an existing regalloc training log"));

cl::opt<unsigned> RegallocMaxEvictions(
    "mlopt-regalloc-max-evictions", cl::init(100), cl::value_desc("n"), cl::cat(RegallocCategory),
    cl::desc("mlopt: after a policy made one virtual register evict this many times in a "
             "function, the default advisor decides for it (ping-pong guard)"));

// The analysis manager of the pipeline being built on this thread (each
// ThinLTO backend builds and runs its own on one thread).
thread_local ModuleAnalysisManager *TheMAM = nullptr;

// Guards the per-process state below: logs, replay traces, the policy pool,
// the IR2Vec decision and once-only reports.
std::mutex StateLock;

bool isPostLink(ThinOrFullLTOPhase Phase) {
  return Phase == ThinOrFullLTOPhase::FullLTOPostLink ||
         Phase == ThinOrFullLTOPhase::ThinLTOPostLink;
}

/// The prefix of the plugin's messages: "mlopt: ", and in lld the binary
/// being linked ("mlopt: libz.so: "), so that an error in a build names it.
std::string mloptPrefix() {
  const mlopt::LinkCommandLine &Link = mlopt::linkCommandLine();
  return Link.Linker ? "mlopt: " + Link.Output + ": " : "mlopt: ";
}

/// What %m means for module M in this inliner run (TrainingLogPath.h).
std::string moduleName(const Module &M, ThinOrFullLTOPhase Phase) {
  if (isPostLink(Phase))
    return mlopt::linkTimeModuleName(mlopt::linkCommandLine().Output,
                                     Phase == ThinOrFullLTOPhase::ThinLTOPostLink,
                                     M.getSourceFileName(), M.getModuleIdentifier());
  return mlopt::trainingLogModuleName(M.getSourceFileName(), M.getModuleIdentifier());
}

/// Whether the inliner gets IR2Vec embeddings: decided once per process.
/// mlopt's option, or LLVM's -ml-inliner-ir2vec-vocab-file (whose
/// vocabulary LLVM reads from -ir2vec-vocab-path). The vocabulary is read
/// once here; an unreadable one is one error and no embeddings.
bool useIR2Vec(LLVMContext &Ctx) {
  std::lock_guard<std::mutex> Guard(StateLock);
  static int Decided = -1;
  if (Decided >= 0)
    return Decided;
  Decided = 0;
  cl::opt<std::string> *StockTrigger =
      mlopt::findLLVMOption<std::string>("ml-inliner-ir2vec-vocab-file");
  cl::opt<std::string> *VocabPath = mlopt::findLLVMOption<std::string>("ir2vec-vocab-path");
  bool Stock = StockTrigger && !StockTrigger->empty();
  if (IR2VecVocab.empty() && !Stock)
    return false;
  try {
    std::string Path = IR2VecVocab;
    if (Path.empty())
      Path = VocabPath ? std::string(*VocabPath) : "";
    if (Path.empty())
      throw mlopt::IR2VecVocabError("-ml-inliner-ir2vec-vocab-file needs -ir2vec-vocab-path=FILE "
                                    "(or use -mlopt-inline-ir2vec-vocab=FILE)");
    if (VocabPath && !VocabPath->empty() && std::string(*VocabPath) != Path)
      throw mlopt::IR2VecVocabError("-mlopt-inline-ir2vec-vocab=" + Path +
                                    " and -ir2vec-vocab-path=" + std::string(*VocabPath) +
                                    " name different vocabularies");
    mlopt::loadIR2VecVocabulary(Path); // LLVM's reader: reports errors here, once
    if (VocabPath)
      *VocabPath = Path; // what LLVM's IR2VecVocabAnalysis reads
    Decided = 1;
  } catch (const std::exception &E) {
    Ctx.diagnose(mlopt::PluginDiagnostic(DS_Error, mloptPrefix() + E.what()));
  }
  return Decided;
}

/// One log per expanded path (with %m: per module), owned by the first
/// module that writes it; sessions of the inliner on that module append to
/// it. A second module on the same path (a plain file given to a ThinLTO
/// link) gets no log and one error. A log that cannot be created is
/// reported once per path as an error and compilation goes on without it.
mlopt::TrainingLogWriter *trainingLog(LLVMContext &Ctx, const Module &M, const std::string &Name,
                                      const mlopt::InlinePolicyRunner &Runner) {
  struct Log {
    std::string Owner; // the module identifier that writes it
    std::unique_ptr<mlopt::TrainingLogWriter> Writer;
  };
  static std::map<std::string, Log> Logs;
  if (TrainingLogPath.empty())
    return nullptr;
  std::lock_guard<std::mutex> Guard(StateLock);
  std::string Path = mlopt::expandTrainingLogPath(TrainingLogPath, Name);
  auto [It, Inserted] = Logs.try_emplace(Path);
  if (!Inserted) {
    if (It->second.Owner == M.getModuleIdentifier())
      return It->second.Writer.get(); // nullptr after a failure, already reported
    Ctx.emitError(Twine(mloptPrefix()) + "modules '" + It->second.Owner + "' and '" +
                  M.getModuleIdentifier() + "' would write one training log '" + Path +
                  "'; give each module its own (a directory ending in '/', or %m)");
    return nullptr;
  }
  It->second.Owner = M.getModuleIdentifier();
  std::unique_ptr<mlopt::TrainingLogWriter> &Writer = It->second.Writer;
  try {
    mlopt::makeParentDirectory(Path);
    Writer = std::make_unique<mlopt::TrainingLogWriter>(
        mlopt::FdSink::create(Path, TrainingLogOverwrite),
        mlopt::trainingLogFeatures(Runner, TrainingLogCalleeLinkage));
    Writer->switchContext("");
  } catch (const mlopt::FileError &E) {
    Writer.reset();
    std::string Hint = E.code().value() == EEXIST
                           ? " (pass -mlopt-inline-training-log-overwrite to replace it, or "
                             "use a per-module pattern such as logs/%m.log)"
                           : "";
    Ctx.emitError(Twine(mloptPrefix()) + "cannot write training log: " + E.what() + Hint);
  } catch (const std::exception &E) {
    Writer.reset();
    Ctx.emitError(Twine(mloptPrefix()) + "cannot write training log: " + E.what());
  }
  return Writer.get();
}

/// An instance of the policy for one inliner run: the policy is loaded once
/// per compiler process for the inputs LLVM gives (IR2Vec's embeddings are
/// optional: a policy without them runs too), and once more per ThinLTO
/// backend running at the same time (a pool); nullptr after an error
/// (reported once through the first module's context).
std::shared_ptr<mlopt::PolicyModel> policyModel(LLVMContext &Ctx,
                                                const std::vector<mlopt::TensorSpec> &Inputs) {
  static std::shared_ptr<mlopt::PolicyModelPool> Pool;
  static bool Tried = false;
  std::lock_guard<std::mutex> Guard(StateLock);
  if (Tried && !Pool)
    return nullptr;
  try {
    if (!Tried) {
      Tried = true;
      mlopt::PolicyLoadOptions Opts;
      Opts.FeedPrefix = FeedPrefix;
      Opts.LiteRtLibrary = LiteRtLibrary;
      Opts.OptionalFeatures = {"callee_embedding", "caller_embedding", mlopt::DefaultDecisionInput,
                               mlopt::CalleeLinkageInput};
      // + the heuristic's decision and the callee's linkage class, if taken
      std::vector<mlopt::TensorSpec> Offered = Inputs;
      Offered.push_back(
          mlopt::TensorSpec(mlopt::DefaultDecisionInput, mlopt::TensorType::Int64, {1}));
      Offered.push_back(
          mlopt::TensorSpec(mlopt::CalleeLinkageInput, mlopt::TensorType::Int64, {1}));
      Pool = mlopt::PolicyModelPool::load(ModelPath, Offered, Opts);
    }
    return Pool->acquire();
  } catch (const std::exception &E) {
    Pool.reset();
    std::string Text = mloptPrefix() + E.what();
    bool HasEmbeddings = std::any_of(Inputs.begin(), Inputs.end(), [](const mlopt::TensorSpec &S) {
      return S.name() == "callee_embedding";
    });
    if (!HasEmbeddings && Text.find("embedding:0'") != std::string::npos)
      Text +=
          " (the policy takes IR2Vec embeddings: pass -mlopt-inline-ir2vec-vocab=FILE, LLVM 22)";
    Ctx.diagnose(mlopt::PluginDiagnostic(DS_Error, Text));
  }
  return nullptr;
}

/// The runner for one inliner run on the module %m names as Name.
std::unique_ptr<mlopt::InlinePolicyRunner> makeRunner(LLVMContext &Ctx,
                                                      const std::vector<llvm::TensorSpec> &Features,
                                                      const std::string &Name) {
  if (!ModelPath.empty() && !InteractiveBase.empty()) {
    static std::once_flag Reported;
    std::call_once(Reported, [&] {
      Ctx.diagnose(mlopt::PluginDiagnostic(
          DS_Error, "mlopt: -mlopt-inline-model and -mlopt-inline-interactive "
                    "cannot be used together"));
    });
    return nullptr;
  }
  if (!ModelPath.empty()) {
    std::vector<mlopt::TensorSpec> Inputs;
    for (const llvm::TensorSpec &S : Features)
      Inputs.push_back(mlopt::fromLLVM(S));
    if (std::shared_ptr<mlopt::PolicyModel> Model = policyModel(Ctx, Inputs))
      return std::make_unique<mlopt::PolicyModelRunner>(Ctx, Features, Model, ModelShadow);
    return nullptr;
  }
  if (!InteractiveBase.empty())
    return std::make_unique<mlopt::InteractiveRunner>(
        Ctx, Features, mlopt::expandTrainingLogPath(InteractiveBase, Name), InteractiveTimeout,
        InteractiveIncludeDefault);
  return nullptr;
}

/// The forced decisions of -mlopt-inline-replay and -mlopt-inline-callee-decisions
/// for module M: one trace per expanded replay path, so every inliner run on
/// the module continues the same sequence; nullptr without the options or
/// after an error (reported once).
mlopt::DecisionTrace *replay(LLVMContext &Ctx, const Module &M, const std::string &Name) {
  static std::map<std::string, std::unique_ptr<mlopt::DecisionTrace>> Traces;
  if (ReplayPath.empty() && CalleeDecisionsPath.empty())
    return nullptr;
  std::lock_guard<std::mutex> Guard(StateLock);
  std::string Path =
      ReplayPath.empty() ? std::string() : mlopt::expandTrainingLogPath(ReplayPath, Name);
  // Per module (%m): a module without a file of its own keeps its decisions.
  bool PerModule = StringRef(CalleeDecisionsPath).contains("%m");
  std::string Callees = PerModule ? mlopt::expandTrainingLogPath(CalleeDecisionsPath, Name)
                                  : std::string(CalleeDecisionsPath);
  if (PerModule && !sys::fs::exists(Callees))
    Callees.clear();
  if (Path.empty() && Callees.empty())
    return nullptr;
  auto [It, Inserted] =
      Traces.try_emplace((Path.empty() ? M.getModuleIdentifier() : Path) + '\0' + Callees);
  if (!Inserted)
    return It->second.get();
  try {
    auto Trace = std::make_unique<mlopt::DecisionTrace>();
    if (!Path.empty())
      Trace->Forced = mlopt::readDecisionString(Path);
    if (!Callees.empty())
      Trace->ForcedCallees = mlopt::readCalleeDecisions(Callees);
    It->second = std::move(Trace);
  } catch (const std::exception &E) {
    Ctx.emitError(Twine(mloptPrefix()) + "cannot replay decisions: " + E.what());
  }
  return It->second.get();
}

InlineAdvisor *advisorFactory(Module &M, FunctionAnalysisManager &FAM, InlineParams Params,
                              InlineContext IC) {
  if (!TheMAM)
    return new DefaultInlineAdvisor(M, FAM, Params, IC);
  std::string Name = moduleName(M, IC.LTOPhase);
  auto MakeRunner = [Name](LLVMContext &Ctx, const std::vector<llvm::TensorSpec> &Features) {
    return makeRunner(Ctx, Features, Name);
  };
  auto LogFor = [&M, Name](LLVMContext &Ctx, const mlopt::InlinePolicyRunner &R) {
    return trainingLog(Ctx, M, Name, R);
  };
  return mlopt::makeInlineAdvisor(M, FAM, *TheMAM, Params, IC, MakeRunner, LogFor,
                                  replay(M.getContext(), M, Name), useIR2Vec(M.getContext()),
                                  InlineFeatures);
}

bool pluginActive() {
  return !TrainingLogPath.empty() || !InteractiveBase.empty() || !ModelPath.empty() ||
         !IR2VecVocab.empty() || !ReplayPath.empty() || !CalleeDecisionsPath.empty() ||
         ForceMLAdvisor;
}

// The link-time module this thread's LTO backend compiles (lld runs a
// backend's optimizer and code generator on one thread): %m of a regalloc
// log written in lld.
thread_local std::string LinkModuleName;

void registerCallbacks(PassBuilder &PB) {
  if (!SaveLTOModules.empty())
    mlopt::installLTOModuleSaver(PB, SaveLTOModules);
  PassInstrumentationCallbacks *PIC = PB.getPassInstrumentationCallbacks();
  if (!RegallocLogPath.empty() && PIC && mlopt::linkCommandLine().Linker) {
    auto Named = std::make_shared<bool>(false); // once per pipeline (per backend)
    PIC->registerBeforeNonSkippedPassCallback([Named](StringRef, Any IR) {
      const Module *M = *Named ? nullptr : mlopt::passModule(IR);
      if (!M)
        return;
      *Named = true;
      LinkModuleName =
          moduleName(*M, mlopt::isMergedLTOModule(*M) ? ThinOrFullLTOPhase::FullLTOPostLink
                                                      : ThinOrFullLTOPhase::ThinLTOPostLink);
    });
  }
  PB.registerAnalysisRegistrationCallback([](ModuleAnalysisManager &MAM) {
    if (!pluginActive())
      return;
    TheMAM = &MAM;
    MAM.registerPass([] { return PluginInlineAdvisorAnalysis(advisorFactory); });
  });
}

#ifdef MLOPT_HAVE_REGALLOC
/// The session of one eviction analysis (one per llc/clang codegen
/// pipeline), from the options; nullptr without regalloc options.
std::shared_ptr<mlopt::EvictionSession> regallocSession() {
  if (RegallocModel.empty() && RegallocLogPath.empty())
    return nullptr;
  mlopt::EvictionSessionOptions Opts;
  Opts.MaxEvictionsPerVReg = RegallocMaxEvictions;
  std::vector<std::string> Errors;
  if (!RegallocModel.empty()) {
    static std::shared_ptr<mlopt::EvictionDecider> Decider;
    static std::string LoadError;
    static bool Tried = false;
    if (!Tried) {
      Tried = true;
      try {
        mlopt::PolicyLoadOptions Load;
        Load.LiteRtLibrary = LiteRtLibrary;
        Load.DecisionName = "index_to_evict";
        std::vector<mlopt::TensorSpec> Features = mlopt::evictionFeatureSpecs();
        Decider = std::make_shared<mlopt::PolicyEvictionDecider>(
            mlopt::loadPolicyModel(RegallocModel, Features, Load));
      } catch (const std::exception &E) {
        LoadError = E.what();
      }
    }
    Opts.Decider = Decider;
    if (!Decider)
      Errors.push_back(LoadError + " (the default advisor decides)");
  }
  if (!RegallocLogPath.empty()) {
    std::string Path = mlopt::expandTrainingLogPath(
        RegallocLogPath, LinkModuleName.empty() ? std::string("module") : LinkModuleName);
    try {
      mlopt::makeParentDirectory(Path);
      Opts.LogSink = mlopt::FdSink::create(Path, RegallocLogOverwrite);
    } catch (const mlopt::FileError &E) {
      std::string Hint = E.code().value() == EEXIST
                             ? " (pass -mlopt-regalloc-training-log-overwrite to replace it)"
                             : "";
      Errors.push_back(std::string("cannot write regalloc training log: ") + E.what() + Hint);
    } catch (const std::exception &E) {
      Errors.push_back(std::string("cannot write regalloc training log: ") + E.what());
    }
  }
  auto S = std::make_shared<mlopt::EvictionSession>(std::move(Opts));
  for (const std::string &E : Errors)
    S->addError(E);
  return S;
}

/// llc -load and clang -fpass-plugin both run this when the plugin loads;
/// options are read later, when the allocator's analysis is built.
const bool RegallocInstalled = (mlopt::installEvictionAdvisor(regallocSession), true);
#endif

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK __attribute__((visibility("default"))) ::llvm::PassPluginLibraryInfo
llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "mlopt", MLOPT_VERSION, registerCallbacks};
}
