//===- FileBytes.h - A whole file, read into memory -------------*- C++ -*-===//
//
// Contract: readFileBytes(Path, Limit) returns the file's bytes. It throws
// FileError (errno and path) when the file cannot be opened or read, and
// FileError with EFBIG when it holds more than Limit bytes (read no further).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_FILEBYTES_H
#define MLOPT_CORE_FILEBYTES_H

#include "ByteSink.h" // FileError

#include <cstddef>
#include <string>

namespace mlopt {

std::string readFileBytes(const std::string &Path, size_t Limit);

} // namespace mlopt

#endif
