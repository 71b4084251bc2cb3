//===- Errors.h - Errors of mlopt's compiler engine -------------*- C++ -*-===//
//
// Contract: the error types the in-process compiler throws, declared here
// (no LLVM needed) so that one exception translator can map every mlopt
// C++ error to its Python class. Errors tied to a core concept stay with it:
// LogFormatError (TrainingLogParser.h), LogUsageError (TrainingLogWriter.h),
// PolicyError (PolicyModel.h), LiteRtError (LiteRtModel.h), SpecError
// (TensorSpec.h), JsonError (Json.h), FileError (ByteSink.h).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_ERRORS_H
#define MLOPT_CORE_ERRORS_H

#include <stdexcept>

namespace mlopt {

/// IR that LLVM cannot read, or that fails verification.
class ModuleError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An error LLVM reported while optimizing or generating code (or a
/// pipeline that opt would reject).
class CompileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An IR2Vec vocabulary that LLVM cannot read (or an LLVM without IR2Vec).
class IR2VecVocabError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace mlopt

#endif
