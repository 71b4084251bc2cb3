//===- CallSiteCosts.h - The heuristic's cost of each call site --*- C++ -*-===//
//
// Contract: for every direct call from a defined function to a defined
// function (module order, then instruction order), LLVM 19's
// getInliningCostEstimate for that site as MLInlineAdvisor asks it (the
// callee's TargetTransformInfo from opt's target machine, the assumption
// cache, default inline parameters): the `cost_estimate` feature the ML
// inliner would log if it were asked about the site in this IR. A site LLVM
// deems not inlinable has Inlinable = false and Cost = 0.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_CALLSITECOSTS_H
#define MLOPT_LLVM_CALLSITECOSTS_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlopt {

struct CallSiteCost {
  std::string Caller;
  std::string Callee;
  bool Inlinable = false;
  int64_t Cost = 0;
};

std::vector<CallSiteCost> callSiteCosts(const std::string &Bitcode, const std::string &Name);

} // namespace mlopt

#endif
