//===- EvictionAdvisorInstall.h - mlopt's eviction advisor in RAGreedy -*- C++ -*-===//
//
// Contract: installEvictionAdvisor(Provider) (the first call per process
// counts) makes LLVM's pass registry build, wherever the
// greedy register allocator asks for its eviction advisor, mlopt's analysis
// when Provider() returns a session (nullptr: LLVM's own analysis, exactly
// as without mlopt). mlopt's analysis runs LLVM's own ML eviction advisor
// (createReleaseModeAdvisor: LLVM's feature extraction, untouched) over an
// in-process channel (EvictionChannel) answered by the session, next to
// LLVM's DefaultEvictionAdvisor, whose choice replaces every invalid reply.
// The VirtRegRewriter built after it reports each function's RegAllocScore
// (LLVM's calculateRegAllocScore, right after rewriting, as LLVM's
// RegAllocScoring pass measures it) to the session when it wants scores.
// Provider runs where the pass is constructed (the thread building the codegen
// pipeline). Only for the LLVM whose private headers the build used
// (evictionHeadersVersion(): the Debian source version).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_EVICTIONADVISORINSTALL_H
#define MLOPT_LLVM_EVICTIONADVISORINSTALL_H

#include "EvictionSession.h"

#include <memory>

namespace mlopt {

using EvictionSessionProvider = std::shared_ptr<EvictionSession> (*)();

void installEvictionAdvisor(EvictionSessionProvider Provider);

/// The LLVM source version whose private headers this build used.
const char *evictionHeadersVersion();

} // namespace mlopt

#endif
