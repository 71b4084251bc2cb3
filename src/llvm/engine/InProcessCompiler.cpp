#include "InProcessCompiler.h"
#include "FunctionCodeReuse.h"
#include "IR2VecVocabulary.h"
#include "InlineAdvisorFactory.h"
#include "InlinerPrefixSkip.h"
#include "MLoptInlineAdvisor.h"
#include "ObjectTextSize.h"
#include "TextSizeCache.h"
#include "ToolSetup.h"
#include "TraceableCodegen.h"

#include "ByteSink.h"
#include "TrainingLogWriter.h"

#include "LLVMVersion.h"
#ifdef MLOPT_HAVE_REGALLOC
#include "EvictionAdvisorInstall.h"
#endif

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace mlopt {

namespace {

/// State of the compile running on this thread, for the advisor factory
/// (PluginInlineAdvisorAnalysis takes a plain function pointer).
struct AdvisorState {
  ModuleAnalysisManager *MAM = nullptr;
  const RunnerFactory *MakeRunner = nullptr;
  StringSink *LogSink = nullptr; // owned by Log
  std::unique_ptr<TrainingLogWriter> Log;
  DecisionTrace *Sites = nullptr; // the compile's decisions (and names)
  bool LogCalleeLinkage = false;
  bool IR2Vec = false;
  InlineFeatures Features = InlineFeatures::Mlopt;
};

thread_local AdvisorState *Current = nullptr;

InlineAdvisor *advisorFactory(Module &M, FunctionAnalysisManager &FAM, InlineParams Params,
                              InlineContext IC) {
  AdvisorState *S = Current;
  if (!S)
    return new DefaultInlineAdvisor(M, FAM, Params, IC);
  // One log per compile; a pipeline's inliner sessions append to it, as
  // they do to the plugin's log in one opt process.
  auto LogFor = [S](LLVMContext &, const InlinePolicyRunner &Runner) {
    if (!S->Log) {
      auto Sink = std::make_unique<StringSink>();
      S->LogSink = Sink.get();
      S->Log = std::make_unique<TrainingLogWriter>(
          std::move(Sink), trainingLogFeatures(Runner, S->LogCalleeLinkage));
      S->Log->switchContext("");
    }
    return S->Log.get();
  };
  return makeInlineAdvisor(M, FAM, *S->MAM, Params, IC, *S->MakeRunner, LogFor, S->Sites, S->IR2Vec,
                           S->Features);
}

#ifdef MLOPT_HAVE_REGALLOC
/// The regalloc settings and session of the compile on this thread.
struct RegallocState {
  const CompileOptions *Options = nullptr;
  std::shared_ptr<EvictionSession> Session;
};
thread_local RegallocState *CurrentRegalloc = nullptr;

std::shared_ptr<EvictionSession> engineEvictionSession() {
  RegallocState *S = CurrentRegalloc;
  if (!S || !S->Options->Regalloc)
    return nullptr;
  EvictionSessionOptions Opts;
  Opts.Decider = S->Options->RegallocDecider;
  Opts.LogSink = std::make_unique<StringSink>();
  Opts.MaxEvictionsPerVReg = S->Options->RegallocMaxEvictions;
  Opts.Score = true;
  S->Session = std::make_shared<EvictionSession>(std::move(Opts));
  return S->Session;
}
#endif

struct CurrentScope {
  explicit CurrentScope(AdvisorState &S) { Current = &S; }
  ~CurrentScope() { Current = nullptr; }
};

[[noreturn]] void throwDiagnostics(const std::string &Name,
                                   const std::vector<std::string> &Errors) {
  std::string Text = Name + ": " + Errors.front();
  if (Errors.size() > 1)
    Text += " (and " + std::to_string(Errors.size() - 1) + " more errors)";
  throw CompileError(Text);
}

} // namespace

bool regallocSupported() {
#ifdef MLOPT_HAVE_REGALLOC
  return true;
#else
  return false;
#endif
}

std::string regallocSourceVersion() {
#ifdef MLOPT_HAVE_REGALLOC
  return evictionHeadersVersion();
#else
  return "";
#endif
}

LoadedModule loadModule(const std::string &Bytes, const std::string &Name) {
  LLVMContext Ctx;
  collectDiagnostics(Ctx);
  std::unique_ptr<Module> M = parseModule(Ctx, Bytes, Name);
  LoadedModule Loaded;
  Loaded.Triple = moduleTriple(*M);
  for (const Function &F : *M) {
    if (F.isDeclaration())
      continue;
    ++Loaded.DefinedFunctions;
    // clang's front end never sets these on a definition; function-attrs
    // and globalopt do.
    if (F.hasFnAttribute(Attribute::NoFree) || F.hasFnAttribute(Attribute::NoSync) ||
        F.hasFnAttribute(Attribute::WillReturn) ||
        F.getUnnamedAddr() == GlobalValue::UnnamedAddr::Local)
      ++Loaded.OptimizedFunctions;
    if (F.hasFnAttribute(Attribute::OptimizeNone))
      ++Loaded.OptNoneFunctions;
  }
  if (isBitcode(reinterpret_cast<const unsigned char *>(Bytes.data()),
                reinterpret_cast<const unsigned char *>(Bytes.data() + Bytes.size()))) {
    Loaded.Bitcode = Bytes;
  } else {
    raw_string_ostream OS(Loaded.Bitcode);
    WriteBitcodeToFile(*M, OS, /*ShouldPreserveUseListOrder=*/true);
  }
  return Loaded;
}

/// What the options change in code generation, for FunctionCodeReuse keys.
static std::string codegenOptionsText(const CompileOptions &Options) {
  return std::to_string(Options.CodeGenLevel) + " " + Options.RelocModel + " " +
         Options.TargetTriple + (Options.LinkTimeCodegen ? " link-time" : "");
}

/// One compile; with Stubs, functions the cache knows are not generated
/// again (FunctionCodeReuse.h). Empty when a stub did not keep its size:
/// the caller compiles again without stubs.
static std::optional<CompileOutput> compileOnce(const std::string &Bitcode, const std::string &Name,
                                                const CompileOptions &Options,
                                                const RunnerFactory &MakeRunner, bool Stubs) {
  if (Options.Regalloc) {
#ifdef MLOPT_HAVE_REGALLOC
    installEvictionAdvisor(engineEvictionSession);
#else
    throw CompileError(Name + ": this mlopt build has no regalloc eviction advisor (LLVM " +
                       std::to_string(LLVM_VERSION_MAJOR) + ")");
#endif
  }
  std::shared_ptr<const IR2VecVocabulary> Vocab;
  if (!Options.IR2VecVocab.empty()) {
    Vocab = cachedIR2VecVocabulary(Options.IR2VecVocab);
    if (!Vocab) { // read by LLVM under its options: no compile may run meanwhile
      std::unique_lock<std::shared_mutex> OptionsMine(llvmOptionLock());
      Vocab = loadIR2VecVocabulary(Options.IR2VecVocab);
    }
  }
  // LLVM's global options stay as they are during the compile; a traceable
  // one sets its own and holds them alone.
  std::shared_lock<std::shared_mutex> OptionsStable(llvmOptionLock(), std::defer_lock);
  std::unique_lock<std::shared_mutex> OptionsMine(llvmOptionLock(), std::defer_lock);
  std::optional<TraceableCodegenScope> Traceable;
  if (Options.TraceableCodegen) {
    OptionsMine.lock();
    Traceable.emplace();
  } else {
    OptionsStable.lock();
  }
  CompileOutput Out;
  LLVMContext Ctx;
  Ctx.enableDebugTypeODRUniquing();
  DiagnosticCollector &Diags = collectDiagnostics(Ctx);
  // The passes before the inliner do not depend on the policy: a compile
  // of an input and options seen before starts from the module they left.
  std::optional<InlinerPrefixCache::Key> PrefixKey;
  std::shared_ptr<const InlinerPrefix> Prefix;
  if (Options.Cache && Options.Cache->prefixes().capacity() && !Options.Regalloc &&
      !Options.TraceableCodegen) {
    PrefixKey = InlinerPrefixCache::key(Bitcode, Options);
    Prefix = Options.Cache->prefixes().lookup(*PrefixKey);
  }
  std::optional<InlinerPrefixSkip> PrefixSkip;
  if (PrefixKey)
    PrefixSkip.emplace(Prefix ? InlinerPrefixSkip::Mode::Resume : InlinerPrefixSkip::Mode::Record,
                       Diags.Warnings);
  if (Prefix)
    Diags.Warnings = Prefix->Warnings;
  // Verified when it was loaded (loadModule); a recorded prefix is LLVM's own output.
  std::unique_ptr<Module> M =
      parseModule(Ctx, Prefix ? Prefix->Bitcode : Bitcode, Name, /*Verify=*/false);
  if (!Options.TargetTriple.empty())
    setModuleTriple(*M, Triple::normalize(Options.TargetTriple));

  AdvisorState State;
  State.MakeRunner = &MakeRunner;
  DecisionTrace Trace;
  Trace.WantNames = Options.RecordCallSites;
  Trace.Forced = Options.ForcedDecisions;
  Trace.ForcedCallees = Options.ForcedCallees;
  State.Sites = &Trace;
  State.IR2Vec = Vocab != nullptr;
  State.Features = Options.Features;
  State.LogCalleeLinkage = Options.LogCalleeLinkage;
  {
    std::unique_ptr<TargetMachine> TM = createOptTargetMachine(*M, Options.RelocModel);
    std::optional<PipelineTuningOptions> Tuning;
    if (Options.LoopVectorize >= 0 || Options.SLPVectorize >= 0) {
      // As clang sets them (the other options keep their defaults, as in clang
      // without -funroll-loops/-fmerge-functions flags).
      Tuning.emplace();
      Tuning->LoopVectorization = Options.LoopVectorize > 0;
      Tuning->SLPVectorization = Options.SLPVectorize > 0;
    }
    PassSetup Passes(
        *M, TM.get(),
        [&Vocab](ModuleAnalysisManager &MAM) {
          MAM.registerPass([] { return PluginInlineAdvisorAnalysis(advisorFactory); });
          if (Vocab)
            registerIR2VecVocabulary(MAM, Vocab);
        },
        Tuning);
    State.MAM = &Passes.MAM();
    if (PrefixSkip)
      PrefixSkip->registerCallbacks(Passes.instrumentation());
    CurrentScope Scope(State);
    Passes.run(*M, Options.Pipeline);
    // Advisors flush the log when the analysis managers drop them.
  }
  if (State.Log) {
    State.Log->flush();
    Out.TrainingLog = State.LogSink->take();
  }
  if (!Diags.Errors.empty())
    throwDiagnostics(Name, Diags.Errors);
  if (Prefix && !PrefixSkip->reachedInliner())
    throw CompileError(Name +
                       ": internal error: a compile resumed before the inliner never reached it");
  if (PrefixSkip && PrefixSkip->recorded())
    Options.Cache->prefixes().insert(*PrefixKey, std::move(*PrefixSkip->recorded()));
  Out.CallSites = std::move(Trace.Sites);

  // The optimized module is a function of the input, the options and the
  // inliner's decisions: a compile that made the same decisions as an
  // earlier one has the same object code.
  std::optional<TextSizeCache::Key> CacheKey;
  if (Options.Cache && Options.CodeGenLevel >= 0 && !Options.KeepObject && !Options.Regalloc &&
      !Options.TraceableCodegen) {
    CacheKey = TextSizeCache::key(Bitcode, Options, Trace.Decisions);
    if (std::optional<ObjectCodeSize> Size = Options.Cache->lookup(*CacheKey)) {
      Out.TextSize = Size->Text;
      Out.Grouped = std::move(Size->Grouped);
      Out.CacheHit = true;
      Out.Warnings = std::move(Diags.Warnings);
      return Out;
    }
  }

  if (Options.CodeGenLevel >= 0) {
    std::unique_ptr<TargetMachine> TM = createCodeGenTargetMachine(
        *M, Options.CodeGenLevel, Options.RelocModel, Options.LinkTimeCodegen);
    M->setDataLayout(TM->createDataLayout());
    std::optional<ReusePlan> Reuse;
    if (CacheKey && Options.Cache->perFunction())
      Reuse = planReuse(*M, *TM, codegenOptionsText(Options), Options.Cache->functions(), Stubs);
    TargetLibraryInfoImpl TLII(Triple(M->getTargetTriple()));
    SmallVector<char, 0> Buffer;
    raw_svector_ostream OS(Buffer);
#ifdef MLOPT_HAVE_REGALLOC
    RegallocState Regalloc;
    Regalloc.Options = &Options;
    struct RegallocScope {
      explicit RegallocScope(RegallocState &S) { CurrentRegalloc = &S; }
      ~RegallocScope() { CurrentRegalloc = nullptr; }
    } RegallocOn(Regalloc);
#endif
    {
      legacy::PassManager PM;
      PM.add(new TargetLibraryInfoWrapperPass(TLII));
      if (TM->addPassesToEmitFile(PM, OS, nullptr, CodeGenFileType::ObjectFile,
                                  /*DisableVerify=*/false))
        throw CompileError(Name + ": target '" + moduleTriple(*M) + "' cannot emit object files");
      PM.run(*M);
    } // the eviction analysis (and its channel) go with the pass manager
#ifdef MLOPT_HAVE_REGALLOC
    if (Regalloc.Session) {
      Regalloc.Session->finish();
      if (auto *Sink = static_cast<StringSink *>(Regalloc.Session->logSink()))
        Out.RegallocLog = Sink->take();
      for (const FunctionScore &F : Regalloc.Session->scores())
        Out.RegallocScores.emplace_back(F.Function, F.Score, F.Counts);
      Out.RegallocQuestions = Regalloc.Session->stats().Questions;
      Out.RegallocReplaced = Regalloc.Session->stats().Replaced;
    }
#endif
    if (!Diags.Errors.empty())
      throwDiagnostics(Name, Diags.Errors);
    StringRef Object(Buffer.data(), Buffer.size());
    if (Reuse) {
      if (!learnFromObject(Object, *Reuse, *TM, Options.Cache->functions()))
        return std::nullopt;
      Options.Cache->functions().count(Reuse->stubs(), Reuse->Functions.size() - Reuse->stubs(),
                                       /*Redone=*/!Stubs);
    }
    ObjectCodeSize Size = objectCodeSize(Object, Name, Options.GroupedCode);
    if (CacheKey)
      Options.Cache->insert(*CacheKey, Size);
    Out.TextSize = Size.Text;
    Out.Grouped = std::move(Size.Grouped);
    if (Options.KeepObject)
      Out.Object = Object.str();
  }
  Out.Warnings = std::move(Diags.Warnings);
  return Out;
}

CompileOutput compileModule(const std::string &Bitcode, const std::string &Name,
                            const CompileOptions &Options, const RunnerFactory &MakeRunner) {
  initializeTargets();
  if (std::optional<CompileOutput> Out =
          compileOnce(Bitcode, Name, Options, MakeRunner, /*Stubs=*/true))
    return std::move(*Out);
  return std::move(*compileOnce(Bitcode, Name, Options, MakeRunner, /*Stubs=*/false));
}

} // namespace mlopt
