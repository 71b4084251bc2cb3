#include "LinkCommandLine.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/StringSaver.h"

#include <fstream>
#include <iterator>

namespace mlopt {

namespace {

bool isLinkerExecutable() {
  llvm::SmallString<256> Real;
  if (llvm::sys::fs::real_path("/proc/self/exe", Real))
    return false;
  llvm::StringRef Name = llvm::sys::path::filename(Real);
  return Name == "lld" || Name.starts_with("ld.lld") || Name.starts_with("lld-");
}

LinkCommandLine readCommandLine() {
  LinkCommandLine Out;
  Out.Linker = isLinkerExecutable();
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
  bool Shared = false, Pie = false;
  for (size_t I = 1; I < Argv.size(); ++I) {
    llvm::StringRef A(Argv[I]);
    if ((A == "-o" || A == "--output" || A == "-output") && I + 1 < Argv.size())
      Out.Output = Argv[++I];
    else if (A.consume_front("--output="))
      Out.Output = A.str();
    else if (A == "-shared" || A == "--shared" || A == "-Bshareable")
      Shared = true;
    else if (A == "-pie" || A == "--pie" || A == "--pic-executable")
      Pie = true;
    else if (A == "-no-pie" || A == "--no-pie" || A == "--no-pic-executable")
      Pie = false;
    else if (A.consume_front("--lto-O") || A.consume_front("-lto-O") ||
             A.consume_front("-plugin-opt=O") || A.consume_front("--plugin-opt=O")) {
      unsigned Level;
      if (!A.getAsInteger(10, Level) && Level <= 3)
        Out.LTOLevel = int(Level);
    }
  }
  if (Out.Output.empty())
    Out.Output = "a.out";
  Out.Shared = Shared;
  Out.Pic = Shared || Pie;
  return Out;
}

} // namespace

const LinkCommandLine &linkCommandLine() {
  static const LinkCommandLine Line = readCommandLine();
  return Line;
}

} // namespace mlopt
