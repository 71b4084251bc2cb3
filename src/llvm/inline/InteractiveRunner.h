//===- InteractiveRunner.h - MLGO interactive protocol, robustly -*- C++ -*-===//
//
// Contract: speaks LLVM 19's InteractiveModelRunner protocol, byte for byte:
// opens <Base>.in (replies) then <Base>.out (observations), writes the
// header (its inputs: the 38 features, then IR2Vec's embeddings when LLVM
// 22 provides them; plus `inlining_default` when IncludeDefault, and
// `"advice"` = inlining_decision int64 [1]), the context "" and, per
// evaluation, an observation; then reads exactly 8 bytes of advice (non-zero
// = inline). Unlike LLVM's runner it never hangs: opening, and each reply,
// must complete within TimeoutSeconds; a closed or dead host (EOF, EPIPE) or
// a stall makes it warn once and answer with the stock heuristic's decision
// for the rest of the process (per channel: every later runner on Base).
// The inlining_default column holds the real
// default decision (LLVM 19.1.7 writes it over callee_basic_block_count).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INTERACTIVERUNNER_H
#define MLOPT_LLVM_INTERACTIVERUNNER_H

#include "InlinePolicyRunner.h"
#include "TrainingLogWriter.h"

#include <memory>
#include <string>

namespace mlopt {

class InteractiveRunner final : public InlinePolicyRunner {
public:
  InteractiveRunner(llvm::LLVMContext &Ctx, const std::vector<llvm::TensorSpec> &Features,
                    const std::string &Base, double TimeoutSeconds, bool IncludeDefault);
  ~InteractiveRunner() override;
  void switchContext(llvm::StringRef Name) override;

private:
  void *evaluateUntyped() override;
  void fail(const std::string &Why);
  void openChannels();
  bool readReply(int64_t &Value);
  /// The heuristic's decision, as the reply (no host, or it failed).
  void *fallBack() {
    Reply = defaultDecision();
    return &Reply;
  }

  std::string Base;
  int TimeoutMs;
  bool IncludeDefault;
  int InFd = -1;
  std::unique_ptr<TrainingLogWriter> Out;
  int64_t Reply = 0;
  int64_t DefaultColumn = 0;
};

} // namespace mlopt

#endif
