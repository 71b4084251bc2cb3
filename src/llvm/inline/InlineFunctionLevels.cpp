#include "InlineFunctionLevels.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/AbstractCallSite.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/InstrTypes.h"

#include <algorithm>
#include <vector>

using namespace llvm;

namespace mlopt {

namespace {

/// One defined function: its graph edges to defined functions (direct calls
/// and callback functions, as the CallGraph adds them) and its direct calls to
/// defined functions (what the level counts), both as node numbers.
struct Node {
  Function *F;
  SmallVector<unsigned, 4> Edges;
  SmallVector<unsigned, 4> Calls;
  unsigned Index = 0, Low = 0; // Tarjan's (0: not visited yet)
  unsigned StackPos = 0;       // where it was pushed on Tarjan's stack
  bool OnStack = false;
  int Level = -1; // -1: its SCC is not finished
};

} // namespace

void initialFunctionLevels(Module &M, function_ref<void(Function &, unsigned)> Visit) {
  std::vector<Node> Nodes;
  DenseMap<const Function *, unsigned> Number;
  for (Function &F : M)
    if (!F.isDeclaration()) {
      Number[&F] = Nodes.size();
      Nodes.push_back(Node{&F, {}, {}});
    }
  auto NodeOf = [&](const Function *F) -> int {
    if (!F)
      return -1;
    auto It = Number.find(F);
    return It == Number.end() ? -1 : static_cast<int>(It->second);
  };
  for (Node &N : Nodes)
    for (Instruction &I : instructions(*N.F))
      if (auto *Call = dyn_cast<CallBase>(&I)) {
        if (int Callee = NodeOf(Call->getCalledFunction()); Callee >= 0) {
          N.Edges.push_back(Callee);
          N.Calls.push_back(Callee);
        }
        forEachCallbackFunction(*Call, [&](Function *CB) {
          if (int Callee = NodeOf(CB); Callee >= 0)
            N.Edges.push_back(Callee);
        });
      }

  // Tarjan's SCCs from each root, iteratively; an SCC is finished (and its
  // level set) only after every SCC it reaches.
  unsigned NextIndex = 1;
  std::vector<unsigned> Stack;
  std::vector<std::pair<unsigned, unsigned>> Path; // (node, next edge)
  auto FinishSCC = [&](unsigned Root) {
    auto Begin = Stack.begin() + Nodes[Root].StackPos; // the SCC is the top of the stack
    unsigned Level = 0;
    for (auto It = Begin; It != Stack.end(); ++It)
      Nodes[*It].OnStack = false;
    for (auto It = Begin; It != Stack.end(); ++It)
      for (unsigned Callee : Nodes[*It].Calls)
        if (Nodes[Callee].Level >= 0) // not in this SCC: finished before it
          Level = std::max(Level, static_cast<unsigned>(Nodes[Callee].Level) + 1);
    for (auto It = Begin; It != Stack.end(); ++It) {
      Nodes[*It].Level = static_cast<int>(Level);
      Visit(*Nodes[*It].F, Level);
    }
    Stack.erase(Begin, Stack.end());
  };
  auto Enter = [&](unsigned V) {
    Nodes[V].Index = Nodes[V].Low = NextIndex++;
    Nodes[V].OnStack = true;
    Nodes[V].StackPos = Stack.size();
    Stack.push_back(V);
    Path.push_back({V, 0});
  };
  for (unsigned R = 0; R != Nodes.size(); ++R) {
    Function &F = *Nodes[R].F;
    if (Nodes[R].Index ||
        !(!F.hasLocalLinkage() || F.hasAddressTaken(nullptr, /*IgnoreCallbackUses=*/true,
                                                    /*IgnoreAssumeLikeCalls=*/true,
                                                    /*IgnoreLLVMUsed=*/false)))
      continue;
    Enter(R);
    while (!Path.empty()) {
      auto &[V, Next] = Path.back();
      if (Next < Nodes[V].Edges.size()) {
        unsigned W = Nodes[V].Edges[Next++];
        if (!Nodes[W].Index)
          Enter(W); // invalidates V and Next: the loop reads Path.back() again
        else if (Nodes[W].OnStack)
          Nodes[V].Low = std::min(Nodes[V].Low, Nodes[W].Index);
        continue;
      }
      unsigned Done = V;
      Path.pop_back();
      if (!Path.empty())
        Nodes[Path.back().first].Low = std::min(Nodes[Path.back().first].Low, Nodes[Done].Low);
      if (Nodes[Done].Low == Nodes[Done].Index)
        FinishSCC(Done);
    }
  }
}

} // namespace mlopt
