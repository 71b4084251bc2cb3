#include "FeatureUpkeepAdvisor.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

#if MLOPT_HAVE_FEATURE_UPKEEP
#include "InlineFunctionLevels.h"
#include "LLVMOption.h"
#include "LLVMVersion.h"

#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/InlineCost.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Module.h"
#endif

using namespace llvm;

namespace mlopt {

namespace {
/// Whether LLVM's option Name was given (on the command line or by -mllvm).
bool llvmOptionGiven(const char *Name) {
  auto &Options = cl::getRegisteredOptions();
  auto It = Options.find(Name);
  return It != Options.end() && It->second->getNumOccurrences() > 0;
}
} // namespace

std::string featureUpkeepUnusableReason() {
#if !MLOPT_HAVE_FEATURE_UPKEEP
  return "mlopt's feature upkeep is implemented for LLVM 19 and 22";
#else
  // MLInlineAdvisor behaviour that mlopt's upkeep does not reproduce.
  for (const char *Name : {"ml-inliner-skip-policy", "inliner-interactive-channel-base",
                           "inliner-interactive-include-default", "ml-advisor-keep-fpi-cache",
                           "ml-inliner-stop-immediately", "ml-inliner-model-selector"})
    if (llvmOptionGiven(Name))
      return std::string("LLVM's -") + Name + " was given";
  return "";
#endif
}

#if MLOPT_HAVE_FEATURE_UPKEEP

#define DEBUG_TYPE "inline-ml"

namespace {
/// MLOPT_INLINE_COST_MEMO: "0" (off), "stats" (on, counts printed at the end), else on.
StringRef memoSetting() {
  const char *Setting = std::getenv("MLOPT_INLINE_COST_MEMO");
  return Setting ? StringRef(Setting) : StringRef();
}

} // namespace

namespace {
/// FAM, with FunctionCountsAnalysis registered (before any member asks it).
FunctionAnalysisManager &withFunctionCounts(FunctionAnalysisManager &FAM) {
  FAM.registerPass([] { return FunctionCountsAnalysis(); }); // false when already there
  return FAM;
}
} // namespace

FeatureUpkeepAdvisor::FeatureUpkeepAdvisor(Module &M, ModuleAnalysisManager &MAM,
                                           std::unique_ptr<MLModelRunner> Runner,
                                           std::function<bool(CallBase &)> GetDefaultAdvice)
    : InlineAdvisor(
          M, withFunctionCounts(MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager())),
      ModelRunner(std::move(Runner)), GetDefaultAdvice(std::move(GetDefaultAdvice)),
      CG(MAM.getResult<LazyCallGraphAnalysis>(M)), InitialIRSize(getModuleIRSize()),
      CurrentIRSize(InitialIRSize), PSI(MAM.getResult<ProfileSummaryAnalysis>(M)),
      CostMemo(FAM, memoSetting() != "0") {
  if (cl::opt<float> *Threshold = findLLVMOption<float>("ml-advisor-size-increase-threshold"))
    SizeIncreaseThreshold = *Threshold;
  ModelRunner->switchContext("");
  // The call-site height: the position of a function relative to the
  // farthest statically reachable SCC, fixed before inlining (as LLVM).
  initialFunctionLevels(M,
                        [&](Function &F, unsigned Level) { FunctionLevels[&CG.get(F)] = Level; });
  for (auto KVP : FunctionLevels) {
    AllNodes.insert(KVP.first);
    EdgeCount += getLocalCalls(KVP.first->getFunction());
  }
  NodeCount = AllNodes.size();
}

unsigned FeatureUpkeepAdvisor::getInitialFunctionLevel(const Function &F) const {
  const LazyCallGraph::Node *N = CG.lookup(F);
  if (!N)
    return 0;
  auto It = FunctionLevels.find(N);
  return It == FunctionLevels.end() ? 0 : It->second;
}

void FeatureUpkeepAdvisor::onPassEntry(LazyCallGraph::SCC *CurSCC) {
  if (!CurSCC || ForceStop)
    return;
  FPICache.clear();
  InlinedInto.clear();
  // Functions passes between inliner runs may have changed the module-wide
  // features: visit the boundary of the nodes last seen (as LLVM).
  while (!NodesInLastSCC.empty()) {
    const auto *N = *NodesInLastSCC.begin();
    NodesInLastSCC.erase(N);
    EdgeCount += getLocalCalls(N->getFunction());
    auto LevelIt = FunctionLevels.find(N);
    const unsigned NLevel = LevelIt == FunctionLevels.end() ? 0 : LevelIt->second;
    for (const auto &E : *(*N)) {
      const auto *AdjNode = &E.getNode();
      if (AllNodes.insert(AdjNode).second) {
        ++NodeCount;
        NodesInLastSCC.insert(AdjNode);
        FunctionLevels[AdjNode] = NLevel;
      }
    }
  }
  EdgeCount -= EdgesOfLastSeenNodes;
  EdgesOfLastSeenNodes = 0;
  for (const auto &N : *CurSCC)
    NodesInLastSCC.insert(&N);
}

void FeatureUpkeepAdvisor::onPassExit(LazyCallGraph::SCC *CurSCC) {
  FPICache.clear();
  InlinedInto.clear();
  if (!CurSCC || ForceStop)
    return;
  EdgesOfLastSeenNodes = 0;
  for (const LazyCallGraph::Node *N : NodesInLastSCC)
    EdgesOfLastSeenNodes += getLocalCalls(N->getFunction());
  for (const auto &N : *CurSCC)
    if (NodesInLastSCC.insert(&N).second)
      EdgesOfLastSeenNodes += getLocalCalls(N.getFunction());
}

int64_t FeatureUpkeepAdvisor::getLocalCalls(Function &F) {
  return getCachedFPI(F).DirectCallsToDefinedFunctions;
}

DenseSet<const BasicBlock *> *FeatureUpkeepAdvisor::markInlinedInto(Function &F) {
  auto It = InlinedInto.try_emplace(&F).first;
  return It->second ? &*It->second : nullptr; // nullptr: computed when first asked
}

DenseSet<const BasicBlock *> *FeatureUpkeepAdvisor::inlinedIntoReachable(Function &F) {
  auto It = InlinedInto.find(&F);
  if (It == InlinedInto.end())
    return nullptr;
  if (!It->second)
    It->second = reachableBlocks(F);
  return &*It->second;
}

void FeatureUpkeepAdvisor::onSuccessfulInlining(const FeatureUpkeepAdvice &Advice,
                                                bool CalleeWasDeleted) {
  Function *Caller = Advice.getCaller();
  Function *Callee = Advice.getCallee();
  // The caller's properties are no longer valid (LLVM also abandons its
  // dominator tree and loop info, to recompute them at once).
  {
    PreservedAnalyses PA = PreservedAnalyses::all();
    PA.abandon<FunctionCountsAnalysis>();
    FAM.invalidate(*Caller, PA);
  }
  CostMemo.forget(*Caller); // its body changed; the inliner invalidates its analyses only later
  Advice.updateCachedCallerFPI(*this);
  int64_t IRSizeAfter = getIRSize(*Caller) + (CalleeWasDeleted ? 0 : Advice.CalleeIRSize);
  CurrentIRSize += IRSizeAfter - (Advice.CallerIRSize + Advice.CalleeIRSize);
  if (CurrentIRSize > SizeIncreaseThreshold * InitialIRSize)
    ForceStop = true;

  int64_t NewCallerAndCalleeEdges = getCachedFPI(*Caller).DirectCallsToDefinedFunctions;
  if (CalleeWasDeleted) {
    --NodeCount;
    NodesInLastSCC.erase(CG.lookup(*Callee));
    DeadFunctions.insert(Callee);
    InlinedInto.erase(Callee); // its body is gone
  } else {
    NewCallerAndCalleeEdges += getCachedFPI(*Callee).DirectCallsToDefinedFunctions;
  }
  EdgeCount += (NewCallerAndCalleeEdges - Advice.CallerAndCalleeEdges);
}

int64_t FeatureUpkeepAdvisor::getModuleIRSize() const {
  int64_t Ret = 0;
  for (auto &F : M)
    if (!F.isDeclaration())
      Ret += getIRSize(F);
  return Ret;
}

FunctionCounts &FeatureUpkeepAdvisor::getCachedFPI(Function &F) const {
  auto InsertPair = FPICache.insert(std::make_pair(&F, FunctionCounts()));
  if (!InsertPair.second)
    return InsertPair.first->second;
  // As LLVM: the analysis manager's result (cached or computed).
  InsertPair.first->second = FAM.getResult<FunctionCountsAnalysis>(F);
  return InsertPair.first->second;
}

FeatureUpkeepAdvisor::~FeatureUpkeepAdvisor() {
  if (memoSetting() == "stats")
    errs() << "mlopt: inline cost memo: " << CostMemo.hits() << " hits, " << CostMemo.misses()
           << " misses, " << CostMemo.unmemoized() << " call sites not memoized\n";
}

std::unique_ptr<InlineAdvice> FeatureUpkeepAdvisor::getAdviceImpl(CallBase &CB) {
  if (auto Skip = getSkipAdviceIfUnreachableCallsite(CB))
    return Skip;

  auto &Caller = *CB.getCaller();
  auto &Callee = *CB.getCalledFunction();

  auto GetAssumptionCache = [&](Function &F) -> AssumptionCache & {
    return FAM.getResult<AssumptionAnalysis>(F);
  };
  auto &TIR = FAM.getResult<TargetIRAnalysis>(Callee);
  auto &ORE = FAM.getResult<OptimizationRemarkEmitterAnalysis>(Caller);

  auto MandatoryKind = InlineAdvisor::getMandatoryKind(CB, FAM, ORE);
  if (MandatoryKind == InlineAdvisor::MandatoryInliningKind::Never || &Caller == &Callee)
    return getMandatoryAdvice(CB, false);

  bool Mandatory = MandatoryKind == InlineAdvisor::MandatoryInliningKind::Always;

  if (ForceStop) {
    ORE.emit([&] {
      return OptimizationRemarkMissed(DEBUG_TYPE, "ForceStop", &CB)
             << "Won't attempt inlining because module size grew too much.";
    });
    return std::make_unique<InlineAdvice>(this, CB, ORE, Mandatory);
  }

  InlineCostResults *Memo = CostMemo.entry(CB);
  int CostEstimate = 0;
  if (!Mandatory) {
    auto IsCallSiteInlinable = CostMemo.estimate(Memo, CB, TIR, GetAssumptionCache);
    if (!IsCallSiteInlinable)
      return std::make_unique<InlineAdvice>(this, CB, ORE, false);
    CostEstimate = *IsCallSiteInlinable;
  }

  const auto CostFeatures = CostMemo.features(Memo, CB, TIR, GetAssumptionCache);
  if (!CostFeatures)
    return std::make_unique<InlineAdvice>(this, CB, ORE, false);

  if (Mandatory)
    return getMandatoryAdvice(CB, true);

  auto NrCtantParams = 0;
  for (auto I = CB.arg_begin(), E = CB.arg_end(); I != E; ++I)
    NrCtantParams += (isa<Constant>(*I));

  auto &CallerBefore = getCachedFPI(Caller);
  auto &CalleeBefore = getCachedFPI(Callee);

  *ModelRunner->getTensor<int64_t>(FeatureIndex::callee_basic_block_count) =
      CalleeBefore.BasicBlockCount;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::callsite_height) = getInitialFunctionLevel(Caller);
  *ModelRunner->getTensor<int64_t>(FeatureIndex::node_count) = NodeCount;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::nr_ctant_params) = NrCtantParams;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::edge_count) = EdgeCount;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::caller_users) = CallerBefore.Uses;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::caller_conditionally_executed_blocks) =
      CallerBefore.BlocksReachedFromConditionalInstruction;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::caller_basic_block_count) =
      CallerBefore.BasicBlockCount;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::callee_conditionally_executed_blocks) =
      CalleeBefore.BlocksReachedFromConditionalInstruction;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::callee_users) = CalleeBefore.Uses;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::cost_estimate) = CostEstimate;
  *ModelRunner->getTensor<int64_t>(FeatureIndex::is_callee_avail_external) =
      Callee.hasAvailableExternallyLinkage();
  *ModelRunner->getTensor<int64_t>(FeatureIndex::is_caller_avail_external) =
      Caller.hasAvailableExternallyLinkage();
  for (size_t I = 0; I < static_cast<size_t>(InlineCostFeatureIndex::NumberOfFeatures); ++I)
    *ModelRunner->getTensor<int64_t>(
        inlineCostFeatureToMlFeature(static_cast<InlineCostFeatureIndex>(I))) = CostFeatures->at(I);
  return getAdviceFromModel(CB, ORE);
}

std::unique_ptr<FeatureUpkeepAdvice>
FeatureUpkeepAdvisor::getAdviceFromModel(CallBase &CB, OptimizationRemarkEmitter &ORE) {
  return std::make_unique<FeatureUpkeepAdvice>(this, CB, ORE,
                                               static_cast<bool>(ModelRunner->evaluate<int64_t>()));
}

std::unique_ptr<InlineAdvice>
FeatureUpkeepAdvisor::getSkipAdviceIfUnreachableCallsite(CallBase &CB) {
  Function &Caller = *CB.getCaller();
  bool Reachable;
  if (DenseSet<const BasicBlock *> *Live = inlinedIntoReachable(Caller))
    Reachable = Live->contains(CB.getParent());
  else
    Reachable = FAM.getResult<DominatorTreeAnalysis>(Caller).isReachableFromEntry(CB.getParent());
  if (!Reachable)
    return std::make_unique<InlineAdvice>(this, CB, getCallerORE(CB), false);
  return nullptr;
}

std::unique_ptr<InlineAdvice> FeatureUpkeepAdvisor::getMandatoryAdvice(CallBase &CB, bool Advice) {
  if (auto Skip = getSkipAdviceIfUnreachableCallsite(CB))
    return Skip;
  if (Advice && !ForceStop)
    return getMandatoryAdviceImpl(CB);
  return std::make_unique<InlineAdvice>(this, CB, getCallerORE(CB), Advice);
}

std::unique_ptr<FeatureUpkeepAdvice> FeatureUpkeepAdvisor::getMandatoryAdviceImpl(CallBase &CB) {
  return std::make_unique<FeatureUpkeepAdvice>(this, CB, getCallerORE(CB), true);
}

void FeatureUpkeepAdvisor::print(raw_ostream &OS) const {
  OS << "[FeatureUpkeepAdvisor] Nodes: " << NodeCount << " Edges: " << EdgeCount
     << " EdgesOfLastSeenNodes: " << EdgesOfLastSeenNodes << "\n";
}

FeatureUpkeepAdvice::FeatureUpkeepAdvice(FeatureUpkeepAdvisor *Advisor, CallBase &CB,
                                         OptimizationRemarkEmitter &ORE, bool Recommendation)
    : InlineAdvice(Advisor, CB, ORE, Recommendation),
      CallerIRSize(Advisor->isForcedToStop() ? 0 : Advisor->getIRSize(*Caller)),
      CalleeIRSize(Advisor->isForcedToStop() ? 0 : Advisor->getIRSize(*Callee)),
      CallerAndCalleeEdges(Advisor->isForcedToStop() ? 0
                                                     : (Advisor->getLocalCalls(*Caller) +
                                                        Advisor->getLocalCalls(*Callee))),
      PreInlineCallerFPI(Advisor->getCachedFPI(*Caller)) {
  if (Recommendation)
    FPU.emplace(Advisor->getCachedFPI(*getCaller()), CB);
}

void FeatureUpkeepAdvice::reportContextForRemark(DiagnosticInfoOptimizationBase &OR) {
  using namespace ore;
  OR << NV("Callee", Callee->getName());
  const std::vector<TensorSpec> &Features = inlinerFeatures();
  for (size_t I = 0; I < Features.size(); ++I)
    OR << NV(Features[I].name(), *getAdvisor()->getModelRunner().getTensor<int64_t>(I));
  OR << NV("ShouldInline", isInliningRecommended());
}

void FeatureUpkeepAdvice::updateCachedCallerFPI(FeatureUpkeepAdvisor &Advisor) const {
  FPU->finish(Advisor.markInlinedInto(FPU->caller()));
}

void FeatureUpkeepAdvice::recordInliningImpl() {
  ORE.emit([&]() {
    OptimizationRemark R(DEBUG_TYPE, "InliningSuccess", DLoc, Block);
    reportContextForRemark(R);
    return R;
  });
  getAdvisor()->onSuccessfulInlining(*this, /*CalleeWasDeleted*/ false);
}

void FeatureUpkeepAdvice::recordInliningWithCalleeDeletedImpl() {
  ORE.emit([&]() {
    OptimizationRemark R(DEBUG_TYPE, "InliningSuccessWithCalleeDeleted", DLoc, Block);
    reportContextForRemark(R);
    return R;
  });
  getAdvisor()->onSuccessfulInlining(*this, /*CalleeWasDeleted*/ true);
}

void FeatureUpkeepAdvice::recordUnsuccessfulInliningImpl(const InlineResult &Result) {
  getAdvisor()->getCachedFPI(*Caller) = PreInlineCallerFPI;
  ORE.emit([&]() {
    OptimizationRemarkMissed R(DEBUG_TYPE, "InliningAttemptedAndUnsuccessful", DLoc, Block);
    reportContextForRemark(R);
    return R;
  });
}

void FeatureUpkeepAdvice::recordUnattemptedInliningImpl() {
  ORE.emit([&]() {
    OptimizationRemarkMissed R(DEBUG_TYPE, "IniningNotAttempted", DLoc, Block);
    reportContextForRemark(R);
    return R;
  });
}

#endif

} // namespace mlopt
