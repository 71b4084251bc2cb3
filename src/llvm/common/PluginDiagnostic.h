//===- PluginDiagnostic.h - Plain-text plugin diagnostics -------*- C++ -*-===//
//
// Contract: a DiagnosticInfo that prints its text as is, so opt and clang
// show "warning: mlopt: ..." or "error: mlopt: ..." on one line through the
// context's diagnostic handler (clang counts errors and fails the compile;
// opt exits with status 1 on an error).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_PLUGINDIAGNOSTIC_H
#define MLOPT_LLVM_PLUGINDIAGNOSTIC_H

#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"

#include <string>

namespace mlopt {

class PluginDiagnostic final : public llvm::DiagnosticInfo {
public:
  PluginDiagnostic(llvm::DiagnosticSeverity Severity, std::string Text)
      : DiagnosticInfo(kind(), Severity), Text(std::move(Text)) {}
  void print(llvm::DiagnosticPrinter &DP) const override { DP << Text; }

private:
  static int kind() {
    static const int K = llvm::getNextAvailablePluginDiagnosticKind();
    return K;
  }
  std::string Text;
};

} // namespace mlopt

#endif
