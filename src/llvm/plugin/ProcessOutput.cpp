#include "ProcessOutput.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/StringSaver.h"

#include <fstream>
#include <iterator>

namespace mlopt {

namespace {

std::string readOutputFile() {
  std::ifstream In("/proc/self/cmdline", std::ios::binary);
  std::string Bytes((std::istreambuf_iterator<char>(In)), std::istreambuf_iterator<char>());
  llvm::BumpPtrAllocator Alloc;
  llvm::StringSaver Saver(Alloc);
  llvm::SmallVector<const char *, 64> Argv;
  for (size_t Start = 0; Start < Bytes.size();) {
    size_t End = Bytes.find('\0', Start);
    if (End == std::string::npos)
      End = Bytes.size();
    Argv.push_back(Saver.save(llvm::StringRef(Bytes).slice(Start, End)).data());
    Start = End + 1;
  }
  llvm::cl::ExpansionContext Expand(Alloc, llvm::cl::TokenizeGNUCommandLine);
  if (llvm::Error E = Expand.expandResponseFiles(Argv))
    llvm::consumeError(std::move(E)); // what could not be expanded stays as it is
  std::string Output;
  for (size_t I = 1; I < Argv.size(); ++I) {
    llvm::StringRef A(Argv[I]);
    if ((A == "-o" || A == "--output" || A == "-output") && I + 1 < Argv.size())
      Output = Argv[++I];
    else if (A.consume_front("--output="))
      Output = A.str();
  }
  return Output.empty() ? std::string("a.out") : Output;
}

} // namespace

const std::string &processOutputFile() {
  static const std::string Output = readOutputFile();
  return Output;
}

} // namespace mlopt
