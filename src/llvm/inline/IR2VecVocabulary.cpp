#include "IR2VecVocabulary.h"
#include "Errors.h"
#include "LLVMOption.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#if LLVM_VERSION_MAJOR >= 22
#include "llvm/Analysis/IR2Vec.h"
#endif

#include <map>
#include <mutex>
#include <sys/stat.h>

using namespace llvm;

namespace mlopt {

namespace {

struct FileStamp {
  off_t Size = -1;
  int64_t MTimeNs = 0;
  bool operator==(const FileStamp &O) const { return Size == O.Size && MTimeNs == O.MTimeNs; }
};

FileStamp stampOf(const std::string &Path) {
  struct stat St;
  if (stat(Path.c_str(), &St) != 0)
    return {};
  return {St.st_size, int64_t(St.st_mtim.tv_sec) * 1000000000 + St.st_mtim.tv_nsec};
}

std::mutex CacheLock;
std::map<std::string, std::pair<FileStamp, std::shared_ptr<const IR2VecVocabulary>>> Cache;

#if LLVM_VERSION_MAJOR >= 22
/// Records LLVM's error messages instead of printing them (and exiting).
struct ErrorRecorder final : DiagnosticHandler {
  bool handleDiagnostics(const DiagnosticInfo &DI) override {
    if (DI.getSeverity() == DS_Error) {
      std::string Text;
      raw_string_ostream OS(Text);
      DiagnosticPrinterRawOStream DP(OS);
      DI.print(DP);
      Errors.push_back(OS.str());
    }
    return true;
  }
  std::vector<std::string> Errors;
};

cl::opt<std::string> &vocabPathOption() {
  cl::opt<std::string> *Option = findLLVMOption<std::string>("ir2vec-vocab-path");
  if (!Option)
    throw IR2VecVocabError("this LLVM has no -ir2vec-vocab-path option");
  return *Option;
}

std::shared_ptr<const IR2VecVocabulary> readWithLLVM(const std::string &Path) {
  cl::opt<std::string> &Option = vocabPathOption();
  std::string Saved = Option;
  LLVMContext Ctx;
  auto Recorder = std::make_unique<ErrorRecorder>();
  ErrorRecorder *Errors = Recorder.get();
  Ctx.setDiagnosticHandler(std::move(Recorder));
  Module M("ir2vec-vocabulary", Ctx);
  ModuleAnalysisManager MAM;
  Option = Path;
  ir2vec::Vocabulary V = IR2VecVocabAnalysis().run(M, MAM);
  Option = Saved;
  if (!Errors->Errors.empty())
    throw IR2VecVocabError(Path + ": " + Errors->Errors.front());
  if (!V.isValid())
    throw IR2VecVocabError(Path + ": not a valid IR2Vec vocabulary");
  auto Out = std::make_shared<IR2VecVocabulary>();
  Out->Path = Path;
  Out->Dimension = V.getDimension();
  const size_t Sizes[] = {ir2vec::Vocabulary::MaxOpcodes, ir2vec::Vocabulary::MaxCanonicalTypeIDs,
                          ir2vec::Vocabulary::MaxOperandKinds,
                          ir2vec::Vocabulary::MaxPredicateKinds};
  auto It = V.begin();
  for (size_t Size : Sizes) {
    Out->Sections.emplace_back();
    for (size_t I = 0; I < Size; ++I, ++It)
      Out->Sections.back().emplace_back((*It).begin(), (*It).end());
  }
  if (It != V.end())
    throw IR2VecVocabError(Path + ": the vocabulary has an unexpected layout");
  return Out;
}
#endif

} // namespace

std::shared_ptr<const IR2VecVocabulary> cachedIR2VecVocabulary(const std::string &Path) {
  std::lock_guard<std::mutex> Guard(CacheLock);
  auto It = Cache.find(Path);
  if (It == Cache.end() || !(It->second.first == stampOf(Path)))
    return nullptr;
  return It->second.second;
}

std::shared_ptr<const IR2VecVocabulary> loadIR2VecVocabulary(const std::string &Path) {
#if LLVM_VERSION_MAJOR >= 22
  if (auto Cached = cachedIR2VecVocabulary(Path))
    return Cached;
  FileStamp Stamp = stampOf(Path);
  if (Stamp.Size < 0)
    throw IR2VecVocabError(Path + ": no such IR2Vec vocabulary file");
  std::shared_ptr<const IR2VecVocabulary> V = readWithLLVM(Path);
  std::lock_guard<std::mutex> Guard(CacheLock);
  Cache[Path] = {Stamp, V};
  return V;
#else
  throw IR2VecVocabError(Path + ": IR2Vec embeddings need LLVM 21 or later (this is LLVM " +
                         LLVM_VERSION_STRING + ")");
#endif
}

void registerIR2VecVocabulary(ModuleAnalysisManager &MAM,
                              std::shared_ptr<const IR2VecVocabulary> V) {
#if LLVM_VERSION_MAJOR >= 22
  MAM.registerPass([V] {
    std::vector<std::vector<ir2vec::Embedding>> Sections;
    for (const auto &Section : V->Sections) {
      Sections.emplace_back();
      for (const std::vector<double> &E : Section)
        Sections.back().emplace_back(E);
    }
    return IR2VecVocabAnalysis(ir2vec::VocabStorage(std::move(Sections)));
  });
#else
  (void)MAM;
  throw IR2VecVocabError(V->Path + ": IR2Vec embeddings need LLVM 21 or later");
#endif
}

} // namespace mlopt
