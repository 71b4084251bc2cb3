//===- TrainingLogPath.h - Where a translation unit's log goes --*- C++ -*-===//
//
// Contract: expandTrainingLogPath(Pattern, SourceFile, ModuleId) is the log
// path for one module. A Pattern ending in '/' is a directory and means
// "<dir>/%m.log". "%m" becomes the module's name: SourceFile (ModuleId when
// empty) without a leading "./" or "/", with every '/' written as '_' (so
// "src/a.c" -> "src_a.c"); "%p" becomes the process id; "%%" is '%'. Any
// other '%' is kept as is. makeParentDirectory(Path) creates the directories
// above Path (like mkdir -p) and throws FileError when it cannot.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_TRAININGLOGPATH_H
#define MLOPT_CORE_TRAININGLOGPATH_H

#include <string>

namespace mlopt {

std::string trainingLogModuleName(const std::string &SourceFile, const std::string &ModuleId);

std::string expandTrainingLogPath(const std::string &Pattern, const std::string &SourceFile,
                                  const std::string &ModuleId);

void makeParentDirectory(const std::string &Path);

} // namespace mlopt

#endif
