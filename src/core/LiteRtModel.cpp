#include "LiteRtModel.h"
#include "FileBytes.h"
#include "TfliteVerifier.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace mlopt {

// -- Our declarations of LiteRT 2.3.0's C API (litert/c/*.h at that tag) ------
namespace {
typedef int LiteRtStatus; // 0 = kLiteRtStatusOk
typedef size_t LiteRtParamIndex;
typedef struct LiteRtEnvironmentT *LiteRtEnvironment;
typedef struct LiteRtModelT *LiteRtModelHandle;
typedef struct LiteRtSignatureT *LiteRtSignature;
typedef struct LiteRtTensorT *LiteRtTensor;
typedef struct LiteRtOptionsT *LiteRtOptions;
typedef struct LiteRtCompiledModelT *LiteRtCompiledModel;
typedef struct LiteRtTensorBufferT *LiteRtTensorBuffer;

struct LiteRtLayout {
  unsigned int rank : 7;
  bool has_strides : 1;
  int32_t dimensions[8];
  uint32_t strides[8];
};
struct LiteRtRankedTensorType {
  int element_type; // LiteRtElementType (TfLiteType numbering)
  LiteRtLayout layout;
};
struct LiteRtAny {
  int type; // kLiteRtAnyTypeInt = 2
  union {
    bool bool_value;
    int64_t int_value;
    double real_value;
    const char *str_value;
    const void *ptr_value;
  };
};
struct LiteRtEnvOption {
  int tag;
  LiteRtAny value;
};
constexpr int AnyTypeInt = 2;
constexpr int EnvTagAutoRegisterAccelerators = 24;
constexpr int EnvTagMinLoggerSeverity = 25;
constexpr int LogSeverityError = 3;
constexpr int HwAcceleratorCpu = 1;
constexpr int TensorTypeIdRanked = 0;

struct Api {
  LiteRtStatus (*CreateEnvironment)(int, const LiteRtEnvOption *, LiteRtEnvironment *);
  void (*DestroyEnvironment)(LiteRtEnvironment);
  LiteRtStatus (*CreateModelFromFile)(LiteRtEnvironment, const char *, LiteRtModelHandle *);
  void (*DestroyModel)(LiteRtModelHandle);
  LiteRtStatus (*GetNumModelSignatures)(LiteRtModelHandle, LiteRtParamIndex *);
  LiteRtStatus (*GetModelSignature)(LiteRtModelHandle, LiteRtParamIndex, LiteRtSignature *);
  LiteRtStatus (*GetSignatureKey)(LiteRtSignature, const char **);
  LiteRtStatus (*GetNumSignatureInputs)(LiteRtSignature, LiteRtParamIndex *);
  LiteRtStatus (*GetNumSignatureOutputs)(LiteRtSignature, LiteRtParamIndex *);
  LiteRtStatus (*GetSignatureInputName)(LiteRtSignature, LiteRtParamIndex, const char **);
  LiteRtStatus (*GetSignatureOutputName)(LiteRtSignature, LiteRtParamIndex, const char **);
  LiteRtStatus (*GetSignatureInputTensorByIndex)(LiteRtSignature, LiteRtParamIndex, LiteRtTensor *);
  LiteRtStatus (*GetSignatureOutputTensorByIndex)(LiteRtSignature, LiteRtParamIndex,
                                                  LiteRtTensor *);
  LiteRtStatus (*GetTensorName)(LiteRtTensor, const char **);
  LiteRtStatus (*GetTensorTypeId)(LiteRtTensor, int *);
  LiteRtStatus (*GetRankedTensorType)(LiteRtTensor, LiteRtRankedTensorType *);
  LiteRtStatus (*CreateOptions)(LiteRtOptions *);
  void (*DestroyOptions)(LiteRtOptions);
  LiteRtStatus (*SetOptionsHardwareAccelerators)(LiteRtOptions, int);
  LiteRtStatus (*CreateCompiledModel)(LiteRtEnvironment, LiteRtModelHandle, LiteRtOptions,
                                      LiteRtCompiledModel *);
  void (*DestroyCompiledModel)(LiteRtCompiledModel);
  LiteRtStatus (*CreateTensorBufferFromHostMemory)(const LiteRtRankedTensorType *, void *, size_t,
                                                   void (*)(void *), LiteRtTensorBuffer *);
  void (*DestroyTensorBuffer)(LiteRtTensorBuffer);
  LiteRtStatus (*RunCompiledModel)(LiteRtCompiledModel, LiteRtParamIndex, size_t,
                                   LiteRtTensorBuffer *, size_t, LiteRtTensorBuffer *);
};

// TfLiteType numbering -> mlopt's TensorType (bool has no TensorSpec type).
bool fromLiteRtType(int ElementType, TensorType &Out, size_t &Size) {
  switch (ElementType) {
  case 1:
    Out = TensorType::Float;
    Size = 4;
    return true;
  case 2:
    Out = TensorType::Int32;
    Size = 4;
    return true;
  case 3:
    Out = TensorType::UInt8;
    Size = 1;
    return true;
  case 4:
    Out = TensorType::Int64;
    Size = 8;
    return true;
  case 7:
    Out = TensorType::Int16;
    Size = 2;
    return true;
  case 9:
    Out = TensorType::Int8;
    Size = 1;
    return true;
  case 11:
    Out = TensorType::Double;
    Size = 8;
    return true;
  case 13:
    Out = TensorType::UInt64;
    Size = 8;
    return true;
  case 16:
    Out = TensorType::UInt32;
    Size = 4;
    return true;
  case 17:
    Out = TensorType::UInt16;
    Size = 2;
    return true;
  case 6:
    Size = 1;
    return false; // bool
  default:
    Size = 0;
    return false;
  }
}

std::string dirOf(const std::string &Path) {
  size_t Slash = Path.rfind('/');
  return Slash == std::string::npos ? std::string(".") : Path.substr(0, Slash);
}

/// The library handle and API table: loaded once per process.
struct Runtime {
  void *Handle = nullptr;
  std::string Path;
  Api A{};
};

Runtime &runtimeFor(const std::string &Explicit, const std::string &ModelPath) {
  static Runtime R;
  if (R.Handle)
    return R;
  std::string Tried;
  std::vector<std::string> Seen;
  for (const std::string &Candidate : liteRtLibraryCandidates(Explicit)) {
    if (std::find(Seen.begin(), Seen.end(), Candidate) != Seen.end())
      continue;
    Seen.push_back(Candidate);
    void *H = dlopen(Candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!H) {
      const char *Err = dlerror();
      bool Exists =
          Candidate.find('/') == std::string::npos || access(Candidate.c_str(), F_OK) == 0;
      Tried += (Tried.empty() ? "" : "; ") + Candidate +
               (Exists ? std::string(" (") + (Err ? Err : "not loadable") + ")"
                       : std::string(" (not found)"));
      continue;
    }
    Runtime Loaded;
    Loaded.Handle = H;
    Loaded.Path = Candidate;
    std::string Missing;
    auto Bind = [&](auto &Fn, const char *Name) {
      Fn = reinterpret_cast<std::remove_reference_t<decltype(Fn)>>(dlsym(H, Name));
      if (!Fn)
        Missing += std::string(Missing.empty() ? "" : ", ") + Name;
    };
    Api &A = Loaded.A;
    Bind(A.CreateEnvironment, "LiteRtCreateEnvironment");
    Bind(A.DestroyEnvironment, "LiteRtDestroyEnvironment");
    Bind(A.CreateModelFromFile, "LiteRtCreateModelFromFile");
    Bind(A.DestroyModel, "LiteRtDestroyModel");
    Bind(A.GetNumModelSignatures, "LiteRtGetNumModelSignatures");
    Bind(A.GetModelSignature, "LiteRtGetModelSignature");
    Bind(A.GetSignatureKey, "LiteRtGetSignatureKey");
    Bind(A.GetNumSignatureInputs, "LiteRtGetNumSignatureInputs");
    Bind(A.GetNumSignatureOutputs, "LiteRtGetNumSignatureOutputs");
    Bind(A.GetSignatureInputName, "LiteRtGetSignatureInputName");
    Bind(A.GetSignatureOutputName, "LiteRtGetSignatureOutputName");
    Bind(A.GetSignatureInputTensorByIndex, "LiteRtGetSignatureInputTensorByIndex");
    Bind(A.GetSignatureOutputTensorByIndex, "LiteRtGetSignatureOutputTensorByIndex");
    Bind(A.GetTensorName, "LiteRtGetTensorName");
    Bind(A.GetTensorTypeId, "LiteRtGetTensorTypeId");
    Bind(A.GetRankedTensorType, "LiteRtGetRankedTensorType");
    Bind(A.CreateOptions, "LiteRtCreateOptions");
    Bind(A.DestroyOptions, "LiteRtDestroyOptions");
    Bind(A.SetOptionsHardwareAccelerators, "LiteRtSetOptionsHardwareAccelerators");
    Bind(A.CreateCompiledModel, "LiteRtCreateCompiledModel");
    Bind(A.DestroyCompiledModel, "LiteRtDestroyCompiledModel");
    Bind(A.CreateTensorBufferFromHostMemory, "LiteRtCreateTensorBufferFromHostMemory");
    Bind(A.DestroyTensorBuffer, "LiteRtDestroyTensorBuffer");
    Bind(A.RunCompiledModel, "LiteRtRunCompiledModel");
    if (!Missing.empty()) {
      dlclose(H);
      Tried += (Tried.empty() ? "" : "; ") + Candidate + " (not the LiteRT 2.3.0 C API: missing " +
               Missing + ")";
      continue;
    }
    R = Loaded;
    return R;
  }
  throw LiteRtError(ModelPath +
                    ": cannot load the LiteRT runtime (libLiteRt.so from "
                    "ai-edge-litert==2.3.0; set MLOPT_LITERT_LIBRARY or "
                    "-mlopt-litert-library=PATH); tried " +
                    Tried);
}

LiteRtStatus check(LiteRtStatus S, const std::string &Path, const char *What) {
  if (S != 0)
    throw LiteRtError(Path + ": LiteRT: " + What + " failed (status " + std::to_string(S) + ")");
  return S;
}

/// Collects what LiteRT/TFLite print on stderr (fd 2) while alive, e.g.
/// "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." printed inside
/// every compiler run. release() restores fd 2 and returns the text.
class StderrCapture {
public:
  StderrCapture() {
    std::fflush(stderr);
    File = std::tmpfile();
    Saved = File ? dup(2) : -1;
    if (Saved >= 0 && dup2(fileno(File), 2) < 0) {
      close(Saved);
      Saved = -1;
    }
  }
  ~StderrCapture() { release(); }
  std::string release() {
    std::string Text;
    if (Saved >= 0) {
      std::fflush(stderr);
      dup2(Saved, 2);
      close(Saved);
      Saved = -1;
      std::rewind(File);
      char Buf[4096];
      size_t N;
      while ((N = std::fread(Buf, 1, sizeof Buf, File)) > 0)
        Text.append(Buf, N);
    }
    if (File) {
      std::fclose(File);
      File = nullptr;
    }
    return Text;
  }

private:
  std::FILE *File = nullptr;
  int Saved = -1;
};

/// Drops LiteRT's INFO lines and keeps the rest on one line, for messages.
std::string oneLine(const std::string &Text, bool KeepInfo) {
  std::string Out;
  std::istringstream In(Text);
  std::string Line;
  while (std::getline(In, Line)) {
    if (Line.empty() || (!KeepInfo && Line.rfind("INFO: ", 0) == 0))
      continue;
    Out += (Out.empty() ? "" : " | ") + Line;
  }
  return Out;
}

} // namespace

std::vector<std::string> liteRtLibraryCandidates(const std::string &Explicit) {
  if (!Explicit.empty())
    return {Explicit};
  std::vector<std::string> Out;
  if (const char *Env = std::getenv("MLOPT_LITERT_LIBRARY"); Env && *Env)
    return {Env};
  // This object lives in <site-packages>/mlopt/ (the Python modules) or
  // <site-packages>/mlopt/lib/llvm-<major>/ (the pass plugins).
  Dl_info Info;
  if (dladdr(reinterpret_cast<void *>(&liteRtLibraryCandidates), &Info) && Info.dli_fname) {
    std::string Dir = dirOf(Info.dli_fname);
    for (int Up = 0; Up < 4; ++Up) {
      Out.push_back(Dir + "/ai_edge_litert/libLiteRt.so");
      Dir = dirOf(Dir);
    }
  }
  Out.push_back("libLiteRt.so");
  return Out;
}

namespace {

constexpr size_t MaxModelBytes = size_t(1) << 30;

std::string readModelFile(const std::string &Path) {
  try {
    return readFileBytes(Path, MaxModelBytes);
  } catch (const FileError &E) {
    if (E.code().value() == EFBIG)
      throw LiteRtError(Path + ": larger than 1 GiB; not a policy model");
    throw LiteRtError(Path + ": cannot read: " + E.code().message());
  }
}

/// An anonymous in-memory file holding Bytes, sealed against any change.
int sealedCopy(const std::string &Bytes, const std::string &Path) {
  int Fd = ::memfd_create("mlopt-model", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (Fd < 0)
    throw LiteRtError(Path + ": cannot make an in-memory copy: " + std::strerror(errno));
  size_t Done = 0;
  while (Done < Bytes.size()) {
    ssize_t N = ::write(Fd, Bytes.data() + Done, Bytes.size() - Done);
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0) {
      int E = errno;
      ::close(Fd);
      throw LiteRtError(Path + ": cannot make an in-memory copy: " + std::strerror(E));
    }
    Done += size_t(N);
  }
  (void)::fcntl(Fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return Fd;
}

} // namespace

struct LiteRtModel::Handles {
  const Api *A = nullptr;
  LiteRtEnvironment Env = nullptr;
  LiteRtModelHandle Model = nullptr;
  LiteRtOptions Options = nullptr;
  LiteRtCompiledModel Compiled = nullptr;
  std::vector<LiteRtTensorBuffer> InBuffers, OutBuffers;
  int Verified = -1; // the sealed copy of the verified model bytes
  ~Handles() {
    if (Verified >= 0)
      ::close(Verified);
    if (!A)
      return;
    for (LiteRtTensorBuffer B : InBuffers)
      A->DestroyTensorBuffer(B);
    for (LiteRtTensorBuffer B : OutBuffers)
      A->DestroyTensorBuffer(B);
    if (Compiled)
      A->DestroyCompiledModel(Compiled);
    if (Options)
      A->DestroyOptions(Options);
    if (Model)
      A->DestroyModel(Model);
    if (Env)
      A->DestroyEnvironment(Env);
  }
};

std::unique_ptr<LiteRtModel> LiteRtModel::loadUnguarded(const std::string &ModelPath,
                                                        const std::string &LibraryPath) {
  std::unique_ptr<LiteRtModel> M(new LiteRtModel());
  M->Path = ModelPath;
  // LiteRT trusts its input (a truncated file can crash or hang it), so it
  // only ever sees bytes that the structural verifier accepted: a private,
  // sealed copy of them, which nobody can change after the check.
  std::string Bytes = readModelFile(ModelPath);
  if (Bytes.size() < 8 || std::memcmp(Bytes.data() + 4, "TFL3", 4) != 0)
    throw LiteRtError(ModelPath + ": not a .tflite model (no TFL3 identifier)");
  std::string Problem =
      tfliteModelProblem(reinterpret_cast<const uint8_t *>(Bytes.data()), Bytes.size());
  if (!Problem.empty())
    throw LiteRtError(ModelPath + ": cannot read this .tflite model: it is truncated or corrupt (" +
                      Problem + ")");
  Runtime &R = runtimeFor(LibraryPath, ModelPath);
  M->Library = R.Path;
  const Api &A = R.A;
  M->H = std::make_unique<Handles>();
  Handles &H = *M->H;
  H.A = &A;

  LiteRtEnvOption Opts[2] = {};
  Opts[0].tag = EnvTagAutoRegisterAccelerators;
  Opts[0].value.type = AnyTypeInt;
  Opts[0].value.int_value = HwAcceleratorCpu; // no GPU/NPU/WebNN probing
  Opts[1].tag = EnvTagMinLoggerSeverity;
  Opts[1].value.type = AnyTypeInt;
  Opts[1].value.int_value = LogSeverityError;
  check(A.CreateEnvironment(2, Opts, &H.Env), ModelPath, "creating the environment");
  {
    StderrCapture Capture;
    H.Verified = sealedCopy(Bytes, ModelPath);
    std::string CopyPath = "/proc/self/fd/" + std::to_string(H.Verified);
    LiteRtStatus S = A.CreateModelFromFile(H.Env, CopyPath.c_str(), &H.Model);
    std::string Said = oneLine(Capture.release(), /*KeepInfo=*/false);
    if (S != 0)
      throw LiteRtError(ModelPath +
                        ": LiteRT cannot read this .tflite model (corrupt or "
                        "unsupported)" +
                        (Said.empty() ? "" : ": " + Said));
  }

  LiteRtParamIndex NumSignatures = 0;
  check(A.GetNumModelSignatures(H.Model, &NumSignatures), ModelPath, "reading signatures");
  if (NumSignatures == 0)
    throw LiteRtError(ModelPath + ": model has no signature");
  LiteRtSignature Sig;
  check(A.GetModelSignature(H.Model, 0, &Sig), ModelPath, "reading signature 0");
  const char *Key = nullptr;
  check(A.GetSignatureKey(Sig, &Key), ModelPath, "reading the signature key");
  M->SignatureKey = Key ? Key : "";

  auto Describe = [&](LiteRtTensor T, const char *SigName, ModelTensor &Info,
                      LiteRtRankedTensorType &RT) {
    Info.SignatureName = SigName ? SigName : "";
    const char *Name = nullptr;
    check(A.GetTensorName(T, &Name), ModelPath, "reading a tensor name");
    Info.TensorName = Name ? Name : "";
    int TypeId = -1;
    check(A.GetTensorTypeId(T, &TypeId), ModelPath, "reading a tensor type");
    if (TypeId != TensorTypeIdRanked)
      throw LiteRtError(ModelPath + ": tensor '" + Info.TensorName + "' has no static shape");
    check(A.GetRankedTensorType(T, &RT), ModelPath, "reading a tensor type");
    size_t ElementSize = 0;
    Info.KnownType = fromLiteRtType(RT.element_type, Info.Type, ElementSize);
    size_t Count = 1;
    for (unsigned I = 0; I < RT.layout.rank; ++I) {
      int32_t D = RT.layout.dimensions[I];
      if (D < 0)
        throw LiteRtError(ModelPath + ": tensor '" + Info.TensorName + "' has a dynamic dimension");
      Info.Shape.push_back(D);
      Count *= static_cast<size_t>(D);
    }
    Info.ByteSize = Count * ElementSize;
  };

  LiteRtParamIndex NumIn = 0, NumOut = 0;
  check(A.GetNumSignatureInputs(Sig, &NumIn), ModelPath, "counting inputs");
  check(A.GetNumSignatureOutputs(Sig, &NumOut), ModelPath, "counting outputs");
  std::vector<LiteRtRankedTensorType> InTypes(NumIn), OutTypes(NumOut);
  for (LiteRtParamIndex I = 0; I < NumIn; ++I) {
    const char *SigName = nullptr;
    LiteRtTensor T;
    check(A.GetSignatureInputName(Sig, I, &SigName), ModelPath, "reading input names");
    check(A.GetSignatureInputTensorByIndex(Sig, I, &T), ModelPath, "reading inputs");
    M->Inputs.emplace_back();
    Describe(T, SigName, M->Inputs.back(), InTypes[I]);
  }
  for (LiteRtParamIndex I = 0; I < NumOut; ++I) {
    const char *SigName = nullptr;
    LiteRtTensor T;
    check(A.GetSignatureOutputName(Sig, I, &SigName), ModelPath, "reading output names");
    check(A.GetSignatureOutputTensorByIndex(Sig, I, &T), ModelPath, "reading outputs");
    M->Outputs.emplace_back();
    Describe(T, SigName, M->Outputs.back(), OutTypes[I]);
  }

  check(A.CreateOptions(&H.Options), ModelPath, "creating options");
  check(A.SetOptionsHardwareAccelerators(H.Options, HwAcceleratorCpu), ModelPath,
        "selecting the CPU");
  {
    StderrCapture Capture;
    LiteRtStatus S = A.CreateCompiledModel(H.Env, H.Model, H.Options, &H.Compiled);
    std::string Said = oneLine(Capture.release(), /*KeepInfo=*/false);
    if (S != 0)
      throw LiteRtError(
          ModelPath + ": LiteRT cannot prepare this model for the CPU" +
          (Said.empty() ? std::string(" (an operator it does not support?)") : ": " + Said));
    if (!Said.empty())
      std::fprintf(stderr, "mlopt: LiteRT: %s\n", Said.c_str());
  }

  auto Bind = [&](std::vector<ModelTensor> &Infos, std::vector<LiteRtRankedTensorType> &Types,
                  std::vector<void *> &Memory, std::vector<LiteRtTensorBuffer> &Buffers) {
    for (size_t I = 0; I < Infos.size(); ++I) {
      size_t Size = 0;
      Memory.push_back(allocateTensorMemory(Infos[I].ByteSize, &Size));
      LiteRtTensorBuffer B = nullptr;
      if (A.CreateTensorBufferFromHostMemory(&Types[I], Memory.back(), Size, nullptr, &B) != 0)
        throw LiteRtError(ModelPath + ": LiteRT: cannot bind a buffer to tensor '" +
                          Infos[I].TensorName + "'");
      Buffers.push_back(B);
    }
  };
  Bind(M->Inputs, InTypes, M->InputMemory, H.InBuffers);
  Bind(M->Outputs, OutTypes, M->OutputMemory, H.OutBuffers);
  // One run on zero inputs, so a model LiteRT cannot execute (for instance
  // an output folded to a constant) fails here, before any decision.
  M->run();
  for (size_t I = 0; I < M->Outputs.size(); ++I)
    std::memset(M->OutputMemory[I], 0, M->Outputs[I].ByteSize);
  return M;
}

std::unique_ptr<LiteRtModel> LiteRtModel::load(const std::string &ModelPath,
                                               const std::string &LibraryPath) {
  try {
    return loadUnguarded(ModelPath, LibraryPath);
  } catch (const LiteRtError &) {
    throw;
  } catch (const std::exception &E) { // thrown inside LiteRT on a model it mishandles
    throw LiteRtError(ModelPath + ": LiteRT failed on this model: " + E.what());
  }
}

LiteRtModel::~LiteRtModel() {
  H.reset();
  for (void *P : InputMemory)
    std::free(P);
  for (void *P : OutputMemory)
    std::free(P);
}

void LiteRtModel::run() {
  const Api &A = *H->A;
  auto Run = [&] {
    return A.RunCompiledModel(H->Compiled, 0, H->InBuffers.size(), H->InBuffers.data(),
                              H->OutBuffers.size(), H->OutBuffers.data());
  };
  if (Run() == 0)
    return;
  // Once more, to say why (LiteRT prints its reasons on stderr).
  StderrCapture Capture;
  LiteRtStatus S = Run();
  std::string Said = oneLine(Capture.release(), /*KeepInfo=*/true);
  throw LiteRtError(Path + ": LiteRT: running the model failed (status " + std::to_string(S) +
                    (Said.empty() ? ")" : "): " + Said));
}

} // namespace mlopt
