//===- InlineFeatures.h - Who keeps the inliner's features up to date -*- C++ -*-===//
//
// Contract: the choice between LLVM's upkeep of the inliner's features
// after each inlining (MLInlineAdvisor: recomputes the caller's dominator
// tree and loop info every time) and mlopt's (FeatureUpkeepAdvisor: the
// same values, by walks; LLVM 19 and 22 without IR2Vec, else LLVM's is used).
// Plugin: -mlopt-inline-features=llvm|mlopt; engine: CompileOptions::Features.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINEFEATURES_H
#define MLOPT_LLVM_INLINEFEATURES_H

namespace mlopt {

enum class InlineFeatures { LLVM, Mlopt };

} // namespace mlopt

#endif
