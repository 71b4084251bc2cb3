#include "CompiledPolicy.h"
#include "PolicyModel.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace mlopt {

namespace {
constexpr size_t MaxPolicyTensorBytes = size_t(64) << 20; // as TfliteVerifier
constexpr size_t MaxPolicyFileBytes = size_t(256) << 20;

std::vector<ModelTensor> readTensors(const json::Value &Sig, const char *Key,
                                     const std::string &Path) {
  const json::Value *List = Sig.get(Key);
  if (!List || !List->isArray())
    throw PolicyError(Path + ": compiled policy signature has no \"" + Key + "\" array");
  std::vector<ModelTensor> Out;
  for (const json::Value &T : List->asArray()) {
    const json::Value *SN = T.isObject() ? T.get("signature_name") : nullptr;
    const json::Value *TN = T.isObject() ? T.get("tensor_name") : nullptr;
    const json::Value *Ty = T.isObject() ? T.get("type") : nullptr;
    const json::Value *Sh = T.isObject() ? T.get("shape") : nullptr;
    if (!SN || !SN->isString() || !TN || !TN->isString() || !Ty || !Ty->isString() || !Sh ||
        !Sh->isArray())
      throw PolicyError(Path + ": malformed tensor in the compiled policy signature");
    ModelTensor M;
    M.SignatureName = SN->asString();
    M.TensorName = TN->asString();
    std::optional<TensorType> Type = tensorTypeFromName(Ty->asString());
    M.KnownType = Type.has_value();
    M.Type = Type.value_or(TensorType::UInt8); // unknown: counted in bytes
    for (const json::Value &D : Sh->asArray()) {
      if (!D.isInt() || D.asInt() < 0)
        throw PolicyError(Path + ": tensor '" + M.TensorName + "' has a bad dimension");
      M.Shape.push_back(D.asInt());
    }
    try { // the same rank and size limits as every tensor spec
      M.ByteSize = TensorSpec(M.TensorName, M.Type, M.Shape).byteSize();
    } catch (const SpecError &E) {
      throw PolicyError(Path + ": compiled policy signature: " + E.what());
    }
    if (M.ByteSize > MaxPolicyTensorBytes)
      throw PolicyError(Path + ": tensor '" + M.TensorName + "' of " + std::to_string(M.ByteSize) +
                        " bytes is too large for a policy");
    Out.push_back(std::move(M));
  }
  return Out;
}

} // namespace

CompiledPolicySignature parseCompiledPolicySignature(const char *Text, const std::string &Path) {
  json::Value Sig;
  try {
    Sig = json::parse(Text ? Text : "");
  } catch (const json::JsonError &E) {
    throw PolicyError(Path + ": compiled policy signature: byte " + std::to_string(E.offset()) +
                      ": " + E.what());
  }
  if (!Sig.isObject())
    throw PolicyError(Path + ": compiled policy signature is not a JSON object");
  CompiledPolicySignature S;
  S.Inputs = readTensors(Sig, "inputs", Path);
  S.Outputs = readTensors(Sig, "outputs", Path);
  if (const json::Value *Spec = Sig.get("output_spec"))
    S.OutputSpec = *Spec;
  return S;
}

namespace {
/// Why the dynamic loader must not be given these bytes, or "" when they are
/// an ELF shared object whose headers and loaded segments lie inside them.
/// glibc's dlopen maps segments without checking them against the file's
/// size: a truncated library (a half-written copy) is a SIGBUS, not an error.
std::string elfProblem(std::string_view Bytes) {
  if (Bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(Bytes.data(), ELFMAG, SELFMAG) != 0)
    return "not an ELF file";
  if (Bytes[EI_CLASS] != ELFCLASS64)
    return "not a 64-bit ELF file";
  Elf64_Ehdr H;
  std::memcpy(&H, Bytes.data(), sizeof H);
  if (H.e_type != ET_DYN)
    return "not an ELF shared object";
  uint64_t Size = Bytes.size();
  if (H.e_phentsize != sizeof(Elf64_Phdr) || H.e_phoff > Size ||
      uint64_t(H.e_phnum) * sizeof(Elf64_Phdr) > Size - H.e_phoff)
    return "truncated or corrupt ELF file (program headers outside the file)";
  for (uint16_t I = 0; I < H.e_phnum; ++I) {
    Elf64_Phdr Ph;
    std::memcpy(&Ph, Bytes.data() + H.e_phoff + uint64_t(I) * sizeof Ph, sizeof Ph);
    if ((Ph.p_type == PT_LOAD || Ph.p_type == PT_DYNAMIC) &&
        (Ph.p_offset > Size || Ph.p_filesz > Size - Ph.p_offset))
      return "truncated or corrupt ELF file (a segment ends after the file's " +
             std::to_string(Size) + " bytes)";
  }
  return "";
}

/// Copies In to Out from the start, in the kernel where it can; false with
/// errno set on an error, false with errno EFBIG past Limit bytes.
bool copyFile(int In, int Out, uint64_t Limit) {
  uint64_t Copied = 0;
  bool Kernel = true;
  std::vector<char> Chunk;
  for (;;) {
    ssize_t N;
    if (Kernel) {
      N = ::sendfile(Out, In, nullptr, size_t(1) << 20);
      if (N < 0 && Copied == 0 && (errno == EINVAL || errno == ENOSYS)) {
        Kernel = false; // not a regular file, or no sendfile: read and write
        continue;
      }
    } else {
      Chunk.resize(size_t(1) << 16);
      N = ::read(In, Chunk.data(), Chunk.size());
      for (ssize_t Done = 0; N > 0 && Done < N;) {
        ssize_t W = ::write(Out, Chunk.data() + Done, size_t(N - Done));
        if (W < 0 && errno != EINTR)
          return false;
        Done += W > 0 ? W : 0;
      }
    }
    if (N < 0 && errno == EINTR)
      continue;
    if (N < 0)
      return false;
    if (N == 0)
      return true;
    if ((Copied += uint64_t(N)) > Limit) {
      errno = EFBIG;
      return false;
    }
  }
}

/// An unnamed private copy of Path: a memfd, else an O_TMPFILE in $TMPDIR
/// (or /tmp). -1 with Error set when Path cannot be read; -1 with Error
/// empty when the system offers neither kind of file.
int privateCopy(const std::string &Path, std::string &Error) {
  int In = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (In < 0) {
    Error = std::strerror(errno);
    return -1;
  }
  int Out = ::memfd_create("mlopt-policy", MFD_CLOEXEC);
  if (Out < 0) {
    const char *Tmp = std::getenv("TMPDIR");
    Out = ::open(Tmp && *Tmp ? Tmp : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  }
  if (Out >= 0 && !copyFile(In, Out, MaxPolicyFileBytes)) {
    int E = errno;
    ::close(Out);
    Out = -1;
    if (E != ENOSPC && E != EDQUOT) // no room for a copy is the system's limit
      Error = E == EFBIG ? "larger than 256 MiB" : std::strerror(E);
  }
  ::close(In);
  return Out;
}

/// elfProblem() of the file behind Fd.
std::string elfProblemOf(int Fd) {
  struct stat St;
  if (::fstat(Fd, &St) != 0)
    return std::strerror(errno);
  if (St.st_size == 0)
    return elfProblem({});
  void *Map = ::mmap(nullptr, size_t(St.st_size), PROT_READ, MAP_PRIVATE, Fd, 0);
  if (Map == MAP_FAILED)
    return std::strerror(errno);
  std::string Problem = elfProblem({static_cast<const char *>(Map), size_t(St.st_size)});
  ::munmap(Map, size_t(St.st_size));
  return Problem;
}

/// The name the dynamic loader opens Fd by, unique among the libraries it
/// has loaded (it hands back a loaded library of the same name, and the
/// number of a closed copy is reused): Fd moves to a higher number while
/// its name is taken. "" when /proc is not mounted or no number is free.
std::string loaderName(int &Fd) {
  if (::access("/proc/self/fd", X_OK) != 0)
    return "";
  for (;;) {
    std::string Name = "/proc/self/fd/" + std::to_string(Fd);
    void *Loaded = dlopen(Name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!Loaded) {
      dlerror(); // "not loaded" is not an error to report later
      return Name;
    }
    dlclose(Loaded);
    int Higher = ::fcntl(Fd, F_DUPFD_CLOEXEC, Fd + 1);
    if (Higher < 0)
      return "";
    ::close(Fd);
    Fd = Higher;
  }
}

/// dlopen()s an unnamed private copy of the file, so that the policy in use
/// cannot change or vanish under the compiler (a .so truncated in place
/// while mapped would otherwise be a SIGBUS). The copy is checked, then
/// opened through /proc/self/fd; its mapping outlives the descriptor.
/// Without memfd, O_TMPFILE or /proc the file itself is checked and opened.
void *openPrivateCopy(const std::string &Path, std::string &Error) {
  int Copy = privateCopy(Path, Error);
  if (!Error.empty())
    return nullptr;
  std::string Name = Copy >= 0 ? loaderName(Copy) : "";
  if (Name.empty()) { // no private copy: the file itself
    if (Copy >= 0)
      ::close(Copy);
    Copy = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
    if (Copy < 0) {
      Error = std::strerror(errno);
      return nullptr;
    }
    Name = Path.find('/') == std::string::npos ? "./" + Path : Path;
  }
  Error = elfProblemOf(Copy);
  void *Handle = Error.empty() ? dlopen(Name.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  ::close(Copy);
  if (!Handle && Error.empty()) {
    const char *Err = dlerror();
    Error = Err ? Err : "dlopen failed";
    // dlerror names the private copy; name the user's file instead.
    if (size_t At = Error.find(Name); At != std::string::npos && Name != Path)
      Error.replace(At, Name.size(), Path);
  }
  return Handle;
}
} // namespace

std::unique_ptr<CompiledPolicy> CompiledPolicy::load(const std::string &Path) {
  std::unique_ptr<CompiledPolicy> P(new CompiledPolicy());
  P->Path = Path;
  std::string Error;
  P->Handle = openPrivateCopy(Path, Error);
  if (!P->Handle)
    throw PolicyError(Path + ": cannot load the compiled policy: " + Error);
  auto Version = reinterpret_cast<int (*)()>(dlsym(P->Handle, "mlopt_policy_abi_version"));
  auto Signature = reinterpret_cast<const char *(*)()>(dlsym(P->Handle, "mlopt_policy_signature"));
  P->Evaluate = reinterpret_cast<int (*)(const void *const *, void *const *)>(
      dlsym(P->Handle, "mlopt_policy_evaluate"));
  if (!Version || !Signature || !P->Evaluate)
    throw PolicyError(Path + ": not an mlopt compiled policy (missing mlopt_policy_* symbols)");
  if (int V = Version(); V != CompiledPolicyABIVersion)
    throw PolicyError(Path + ": compiled policy ABI version " + std::to_string(V) +
                      ", this mlopt reads version " + std::to_string(CompiledPolicyABIVersion) +
                      " (recompile it with `mlopt policy compile`)");
  CompiledPolicySignature Sig = parseCompiledPolicySignature(Signature(), Path);
  P->Inputs = std::move(Sig.Inputs);
  P->Outputs = std::move(Sig.Outputs);
  P->OutputSpec = std::move(Sig.OutputSpec);
  for (const ModelTensor &T : P->Inputs)
    P->InputMemory.push_back(allocateTensorMemory(T.ByteSize));
  for (const ModelTensor &T : P->Outputs)
    P->OutputMemory.push_back(allocateTensorMemory(T.ByteSize));
  P->run(); // as LiteRtModel: a policy that cannot run fails at load
  for (size_t I = 0; I < P->Outputs.size(); ++I)
    std::memset(P->OutputMemory[I], 0, P->Outputs[I].ByteSize);
  return P;
}

CompiledPolicy::~CompiledPolicy() {
  for (void *M : InputMemory)
    std::free(M);
  for (void *M : OutputMemory)
    std::free(M);
  // The handle stays open: code from it may still be referenced by callers
  // holding function-local statics; unloading buys nothing in a compiler.
}

void CompiledPolicy::run() {
  if (int S = Evaluate(InputMemory.data(), OutputMemory.data()); S != 0)
    throw PolicyError(Path + ": compiled policy evaluation failed (status " + std::to_string(S) +
                      ")");
}

} // namespace mlopt
