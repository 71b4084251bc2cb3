// LLVM's private headers (Debian source package of the installed LLVM, see
// ci/llvm_private_headers.py): the advisor classes RAGreedy calls.
#include "AllocationOrder.h"
#include "RegAllocEvictionAdvisor.h"
#include "RegAllocScore.h"

#include "EvictionAdvisorInstall.h"
#include "EvictionChannel.h"
#include "LLVMOption.h"
#include "PluginDiagnostic.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/CodeGen/LiveInterval.h"
#include "llvm/CodeGen/MachineBlockFrequencyInfo.h"
#include "llvm/CodeGen/MachineFunction.h"
#include "llvm/CodeGen/MachineFunctionPass.h"
#include "llvm/CodeGen/MachineLoopInfo.h"
#include "llvm/CodeGen/Passes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/InitializePasses.h"
#include "llvm/Pass.h"
#include "llvm/PassRegistry.h"

#include <mutex>

using namespace llvm;

namespace mlopt {

namespace {

EvictionSessionProvider TheProvider = nullptr;
PassInfo::NormalCtor_t StockAnalysisCtor = nullptr;
PassInfo::NormalCtor_t StockRewriterCtor = nullptr;
/// The session of the analysis built last on this thread, for the
/// VirtRegRewriter of the same pipeline.
thread_local std::shared_ptr<EvictionSession> LastSession;

void report(LLVMContext &Ctx, EvictionSession &S) {
  for (const std::string &E : S.takeErrors())
    Ctx.diagnose(PluginDiagnostic(DS_Error, "mlopt: " + E));
  for (const std::string &W : S.takeWarnings())
    Ctx.diagnose(PluginDiagnostic(DS_Warning, W));
}

class MLoptEvictionAdvisor final : public RegAllocEvictionAdvisor {
public:
  MLoptEvictionAdvisor(const MachineFunction &MF, const RAGreedy &RA,
                       std::unique_ptr<RegAllocEvictionAdvisor> ML, EvictionSession &S)
      : RegAllocEvictionAdvisor(MF, RA), ML(std::move(ML)), Default(MF, RA), S(S) {}

  MCRegister tryFindEvictionCandidate(const LiveInterval &VirtReg, const AllocationOrder &Order,
                                      uint8_t CostPerUseLimit,
                                      const SmallVirtRegSet &FixedRegisters) const override {
    const RegAllocEvictionAdvisor &Stock = Default;
    MCRegister DefaultReg =
        Stock.tryFindEvictionCandidate(VirtReg, Order, CostPerUseLimit, FixedRegisters);
    if (!ML)
      return DefaultReg;
    int64_t DefaultIndex = EvictionSession::NoEviction;
    if (DefaultReg) {
      if (std::optional<unsigned> Limit = getOrderLimit(VirtReg, Order, CostPerUseLimit)) {
        int64_t Pos = 0;
        for (auto I = Order.begin(), E = Order.getOrderLimitEnd(*Limit);
             I != E && Pos < EvictionSession::NoEviction; ++I, ++Pos)
          if (*I == DefaultReg) {
            DefaultIndex = Pos;
            break;
          }
      }
    }
    unsigned &Evictions = EvictionsBy[VirtReg.reg().id()];
    S.beginDecision(DefaultIndex, Evictions);
    MCRegister MLReg =
        ML->tryFindEvictionCandidate(VirtReg, Order, CostPerUseLimit, FixedRegisters);
    EvictionSession::Outcome O = S.endDecision();
    report(MF.getFunction().getContext(), S);
    if (!O.Asked) // LLVM's advisor saw no legal column: as stock's release mode
      return S.usesPolicy() ? MLReg : DefaultReg;
    if (O.UseDefault)
      return DefaultReg;
    if (O.PolicyEvicted)
      ++Evictions;
    return MLReg;
  }

  bool canEvictHintInterference(const LiveInterval &VirtReg, MCRegister PhysReg,
                                const SmallVirtRegSet &FixedRegisters) const override {
    const RegAllocEvictionAdvisor &Stock = Default;
    return Stock.canEvictHintInterference(VirtReg, PhysReg, FixedRegisters);
  }

private:
  std::unique_ptr<RegAllocEvictionAdvisor> ML;
  DefaultEvictionAdvisor Default;
  EvictionSession &S;
  mutable DenseMap<unsigned, unsigned> EvictionsBy;
};

std::mutex &channelOptionLock() {
  static std::mutex M;
  return M;
}

class MLoptEvictionAnalysis final : public RegAllocEvictionAdvisorAnalysis {
public:
  explicit MLoptEvictionAnalysis(std::shared_ptr<EvictionSession> S)
      : RegAllocEvictionAdvisorAnalysis(AdvisorMode::Release), Session(std::move(S)) {}
  ~MLoptEvictionAnalysis() override {
    ML.reset();      // LLVM's runner closes the channel ...
    Channel.reset(); // ... before its thread stops
    Session->finish();
  }

private:
  void getAnalysisUsage(AnalysisUsage &AU) const override {
    AU.addRequired<MachineBlockFrequencyInfoWrapperPass>();
    AU.addRequired<MachineLoopInfoWrapperPass>();
    RegAllocEvictionAdvisorAnalysis::getAnalysisUsage(AU);
  }

  /// LLVM's release-mode analysis, talking to our channel. It is not
  /// scheduled by the pass manager: it resolves its analyses through ours.
  bool startML(const MachineFunction &MF, const RAGreedy &RA,
               std::unique_ptr<RegAllocEvictionAdvisor> &First) {
    LLVMContext &Ctx = MF.getFunction().getContext();
    cl::opt<std::string> *Base =
        findLLVMOption<std::string>("regalloc-evict-interactive-channel-base");
    if (!Base) {
      Ctx.diagnose(PluginDiagnostic(DS_Error, "mlopt: this LLVM has no ML eviction advisor "
                                              "(-regalloc-evict-interactive-channel-base)"));
      return false;
    }
    try {
      EvictionSession *S = Session.get();
      Channel = std::make_unique<EvictionChannel>(
          [S](const LogHeader &H, const char *P) { return S->answer(H, P); },
          [S](const LogHeader &H) { S->onHeader(H); });
    } catch (const std::exception &E) {
      Ctx.diagnose(PluginDiagnostic(DS_Error, std::string("mlopt: ") + E.what()));
      return false;
    }
    std::lock_guard<std::mutex> Lock(channelOptionLock());
    std::string Saved = *Base;
    *Base = Channel->base();
    ML.reset(createReleaseModeAdvisor());
    if (ML) {
      ML->setResolver(new AnalysisResolver(getResolver()->getPMDataManager()));
      linkAnalyses();
      First = ML->getAdvisor(MF, RA); // opens the channel
    }
    *Base = Saved;
    Channel->unlink();
    return ML != nullptr;
  }

  void linkAnalyses() {
    AnalysisResolver *Mine = getResolver(), *Theirs = ML->getResolver();
    Theirs->clearAnalysisImpls();
    for (AnalysisID ID : {static_cast<AnalysisID>(&MachineBlockFrequencyInfoWrapperPass::ID),
                          static_cast<AnalysisID>(&MachineLoopInfoWrapperPass::ID)})
      if (Pass *P = Mine->findImplPass(ID))
        Theirs->addAnalysisImplsPair(ID, P);
  }

  std::unique_ptr<RegAllocEvictionAdvisor> getAdvisor(const MachineFunction &MF,
                                                      const RAGreedy &RA) override {
    std::unique_ptr<RegAllocEvictionAdvisor> Advisor;
    if (!ML && !Failed)
      Failed = !startML(MF, RA, Advisor);
    else if (ML) {
      linkAnalyses();
      Advisor = ML->getAdvisor(MF, RA);
    }
    if (ML && Session->wantsLog() && !Session->awaitHeader(60))
      MF.getFunction().getContext().diagnose(
          PluginDiagnostic(DS_Error, "mlopt: LLVM's eviction advisor sent no header"));
    Session->beginFunction(MF.getName().str());
    report(MF.getFunction().getContext(), *Session);
    return std::make_unique<MLoptEvictionAdvisor>(MF, RA, std::move(Advisor), *Session);
  }

  std::shared_ptr<EvictionSession> Session;
  std::unique_ptr<EvictionChannel> Channel;
  std::unique_ptr<RegAllocEvictionAdvisorAnalysis> ML;
  bool Failed = false;
};

Pass *makeEvictionAnalysis() {
  std::shared_ptr<EvictionSession> S = TheProvider ? TheProvider() : nullptr;
  LastSession = S;
  if (!S)
    return StockAnalysisCtor();
  return new MLoptEvictionAnalysis(std::move(S));
}

/// LLVM's VirtRegRewriter, then the function's RegAllocScore.
class ScoredVirtRegRewriter final : public MachineFunctionPass {
public:
  ScoredVirtRegRewriter(Pass *Stock, std::shared_ptr<EvictionSession> S)
      : MachineFunctionPass(VirtRegRewriterID), Stock(Stock), Session(std::move(S)) {}

  StringRef getPassName() const override { return Stock->getPassName(); }
  void getAnalysisUsage(AnalysisUsage &AU) const override {
    Stock->getAnalysisUsage(AU);
    AU.addRequired<MachineBlockFrequencyInfoWrapperPass>();
  }
  bool doInitialization(Module &M) override {
    if (!Stock->getResolver())
      Stock->setResolver(new AnalysisResolver(getResolver()->getPMDataManager()));
    return Stock->doInitialization(M);
  }
  bool doFinalization(Module &M) override { return Stock->doFinalization(M); }

  bool runOnMachineFunction(MachineFunction &MF) override {
    AnalysisUsage AU;
    Stock->getAnalysisUsage(AU);
    AnalysisResolver *Mine = getResolver(), *Theirs = Stock->getResolver();
    Theirs->clearAnalysisImpls();
    for (const auto *Set : {&AU.getRequiredSet(), &AU.getRequiredTransitiveSet()})
      for (AnalysisID ID : *Set)
        if (Pass *P = Mine->findImplPass(ID))
          Theirs->addAnalysisImplsPair(ID, P);
    bool Changed = static_cast<FunctionPass &>(*Stock).runOnFunction(MF.getFunction());
    const MachineBlockFrequencyInfo &MBFI =
        getAnalysis<MachineBlockFrequencyInfoWrapperPass>().getMBFI();
    RegAllocScore Score = calculateRegAllocScore(MF, MBFI);
    Session->functionScored(FunctionScore{
        MF.getName().str(),
        Score.getScore(),
        {Score.copyCounts(), Score.loadCounts(), Score.storeCounts(), Score.loadStoreCounts(),
         Score.cheapRematCounts(), Score.expensiveRematCounts()}});
    report(MF.getFunction().getContext(), *Session);
    return Changed;
  }

private:
  std::unique_ptr<Pass> Stock;
  std::shared_ptr<EvictionSession> Session;
};

Pass *makeVirtRegRewriter() {
  Pass *Stock = StockRewriterCtor();
  std::shared_ptr<EvictionSession> S = std::move(LastSession); // one pipeline, one session
  LastSession.reset();
  if (!S || !S->wantsScores())
    return Stock;
  return new ScoredVirtRegRewriter(Stock, std::move(S));
}

} // namespace

void installEvictionAdvisor(EvictionSessionProvider Provider) {
  static std::once_flag Once;
  std::call_once(Once, [Provider] {
    TheProvider = Provider;
    PassRegistry &Registry = *PassRegistry::getPassRegistry();
    initializeRegAllocEvictionAdvisorAnalysisPass(Registry);
    initializeVirtRegRewriterPass(Registry);
    auto *Analysis =
        const_cast<PassInfo *>(Registry.getPassInfo(&RegAllocEvictionAdvisorAnalysis::ID));
    auto *Rewriter = const_cast<PassInfo *>(Registry.getPassInfo(&VirtRegRewriterID));
    if (!Analysis || !Rewriter || !Analysis->getNormalCtor() || !Rewriter->getNormalCtor())
      return;
    StockAnalysisCtor = Analysis->getNormalCtor();
    StockRewriterCtor = Rewriter->getNormalCtor();
    Analysis->setNormalCtor(makeEvictionAnalysis);
    Rewriter->setNormalCtor(makeVirtRegRewriter);
  });
}

const char *evictionHeadersVersion() { return MLOPT_REGALLOC_SOURCE_VERSION; }

} // namespace mlopt
