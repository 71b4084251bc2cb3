//===- CalleeDecisions.h - Inlining decisions by callee name -*- C++ -*-===//
//
// Contract: readCalleeDecisions(Path) returns the decisions of a callee
// decision file: one "<0|1> <callee name>" per line (the name is the rest of
// the line, as the module spells it: a mangled symbol), every site calling
// that function gets the decision; blank lines and lines starting with '#'
// are ignored, and a later line for a name overrides an earlier one. It
// throws FileError when the file cannot be read or exceeds 64 MiB, and
// CalleeDecisionsError naming the file, the line and its byte offset when a
// line is not of that form. `mlopt corpus call-sites --callee-decisions`
// writes such files (the one-site-linkonce rule of a package).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_CALLEEDECISIONS_H
#define MLOPT_CORE_CALLEEDECISIONS_H

#include <map>
#include <stdexcept>
#include <string>

namespace mlopt {

class CalleeDecisionsError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

std::map<std::string, bool> readCalleeDecisions(const std::string &Path);

} // namespace mlopt

#endif
