//===- DecisionString.h - A sequence of binary decisions, as text -*- C++ -*-===//
//
// Contract: readDecisionString(Path) returns the '0'/'1' characters of a
// decision file (one character per decision, in the order the compiler
// asks; ASCII whitespace anywhere is ignored). It throws FileError when the
// file cannot be read or exceeds 64 MiB, and DecisionStringError naming the
// file and the byte offset of the first character that is neither a
// decision nor whitespace.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_DECISIONSTRING_H
#define MLOPT_CORE_DECISIONSTRING_H

#include <stdexcept>
#include <string>

namespace mlopt {

class DecisionStringError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

std::string readDecisionString(const std::string &Path);

} // namespace mlopt

#endif
