//===- ProcessOutput.h - The file the host tool writes --------*- C++ -*-===//
//
// Contract: processOutputFile() is the output file named on the command
// line of the process the plugin runs in (lld's link, or clang running a
// distributed ThinLTO backend): the last "-o FILE", "--output=FILE" or
// "--output FILE" of /proc/self/cmdline, response files (@file) expanded as
// LLVM's tools expand them; "a.out" when there is none or the command line
// cannot be read. Read once per process; thread-safe. The plugin names
// link-time training logs after it (TrainingLogPath.h).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_PLUGIN_PROCESSOUTPUT_H
#define MLOPT_PLUGIN_PROCESSOUTPUT_H

#include <string>

namespace mlopt {

const std::string &processOutputFile();

} // namespace mlopt

#endif
