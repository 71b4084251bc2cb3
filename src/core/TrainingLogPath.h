//===- TrainingLogPath.h - Where a translation unit's log goes --*- C++ -*-===//
//
// Contract: expandTrainingLogPath(Pattern, ModuleName) is the log path for
// one module. A Pattern ending in '/' is a directory and means
// "<dir>/%m.log". "%m" becomes ModuleName; "%p" the process id; "%%" is
// '%'. Any other '%' is kept as is. A module's name at compile time is
// trainingLogModuleName(SourceFile, ModuleId): SourceFile (ModuleId when
// empty) without a leading "./" or "/", with every '/' written as '_' (so
// "src/a.c" -> "src_a.c"). At link time (LTO), linkTimeModuleName names it
// after the link's output as well, so that the logs of two binaries built
// from the same sources, and the compile-time logs, stay apart: the merged
// module of a full-LTO link of "out/libz.so" is "out_libz.so.lto", the
// ThinLTO backend of src/a.c in that link "out_libz.so.thinlto/src_a.c". makeParentDirectory(Path)
// creates the directories above Path (like mkdir -p) and throws FileError when it cannot.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_TRAININGLOGPATH_H
#define MLOPT_CORE_TRAININGLOGPATH_H

#include <string>

namespace mlopt {

std::string trainingLogModuleName(const std::string &SourceFile, const std::string &ModuleId);

std::string linkTimeModuleName(const std::string &Output, bool ThinLTOBackend,
                               const std::string &SourceFile, const std::string &ModuleId);

std::string expandTrainingLogPath(const std::string &Pattern, const std::string &ModuleName);

void makeParentDirectory(const std::string &Path);

} // namespace mlopt

#endif
