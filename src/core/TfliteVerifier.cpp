#include "TfliteVerifier.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace mlopt {

namespace {

/// A structural problem at a byte offset (internal: tfliteModelProblem
/// turns it into its return value).
struct Problem {
  size_t Offset;
  std::string What;
};

// Field slots (vtable offsets) of the TFLite schema tables that LiteRT reads.
namespace slot {
enum Model : uint16_t {
  ModelVersion = 4,
  OperatorCodes = 6,
  Subgraphs = 8,
  Description = 10,
  Buffers = 12,
  MetadataBuffer = 14,
  Metadata = 16,
  SignatureDefs = 18,
  ExternalBufferGroups = 20,
  ExternalBuffers = 22
};
enum OperatorCode : uint16_t { CustomCode = 6 };
enum SubGraph : uint16_t { Tensors = 4, Inputs = 6, Outputs = 8, Operators = 10, Name = 12 };
enum Tensor : uint16_t {
  Shape = 4,
  Type = 6,
  BufferIndex = 8,
  TensorName = 10,
  Quantization = 12,
  Sparsity = 16,
  ShapeSignature = 18,
  VariantTensors = 22,
  ExternalBuffer = 24
};
enum Buffer : uint16_t { Data = 4, BufferOffset = 6, BufferSize = 8 };
enum Operator : uint16_t {
  OpcodeIndex = 4,
  OpInputs = 6,
  OpOutputs = 8,
  OptionsType = 10,
  Options = 12,
  CustomOptions = 14,
  MutatingVariableInputs = 18,
  Intermediates = 20,
  LargeCustomOffset = 22,
  LargeCustomSize = 24,
  Options2Type = 26
};
enum SignatureDef : uint16_t {
  SigInputs = 4,
  SigOutputs = 6,
  SignatureKey = 8,
  SubgraphIndex = 12
};
enum TensorMap : uint16_t { MapName = 4, TensorIndex = 6 };
enum Metadata : uint16_t { MetadataName = 4, MetadataBuffer_ = 6 };
enum Quantization : uint16_t { Min = 4, Max = 6, Scale = 8, ZeroPoint = 10, DetailsType = 12 };
} // namespace slot

constexpr uint64_t MaxTensorBytes = uint64_t(64) << 20;
constexpr uint64_t MaxTotalTensorBytes = uint64_t(512) << 20;

/// Bytes per element of TFLite TensorType values (0: variable-size or unknown).
size_t tfliteTypeSize(int8_t Type) {
  switch (Type) {
  case 0:
    return 4; // FLOAT32
  case 1:
    return 2; // FLOAT16
  case 2:
    return 4; // INT32
  case 3:
    return 1; // UINT8
  case 4:
    return 8; // INT64
  case 6:
    return 1; // BOOL
  case 7:
    return 2; // INT16
  case 8:
    return 8; // COMPLEX64
  case 9:
    return 1; // INT8
  case 10:
    return 8; // FLOAT64
  case 11:
    return 16; // COMPLEX128
  case 12:
    return 8; // UINT64
  case 15:
    return 4; // UINT32
  case 16:
    return 2; // UINT16
  default:
    return 0; // STRING (5), RESOURCE, VARIANT, INT4, ...
  }
}

class Verifier {
public:
  Verifier(const uint8_t *Data, size_t Size) : Data(Data), Size(Size) {}

  struct Table {
    size_t Pos = 0, VTable = 0;
    uint16_t VTableSize = 0, TableSize = 0;
  };
  struct Vector {
    size_t Elements = 0; // offset of the first element
    uint32_t Count = 0;
  };

  [[noreturn]] void fail(size_t At, std::string What) { throw Problem{At, std::move(What)}; }

  bool in(size_t Off, uint64_t Len) const { return Off <= Size && Len <= Size - Off; }
  template <typename T> T read(size_t Off) const {
    T V;
    std::memcpy(&V, Data + Off, sizeof V);
    return V;
  }

  Table table(size_t Pos, const std::string &What) {
    if (Pos % 4 || !in(Pos, 4))
      fail(Pos, What + ": table offset outside the file or misaligned");
    int64_t VT = int64_t(Pos) - int64_t(read<int32_t>(Pos));
    if (VT < 0 || VT % 2 || !in(size_t(VT), 4))
      fail(Pos, What + ": vtable outside the file");
    Table T;
    T.Pos = Pos;
    T.VTable = size_t(VT);
    T.VTableSize = read<uint16_t>(T.VTable);
    T.TableSize = read<uint16_t>(T.VTable + 2);
    if (T.VTableSize < 4 || T.VTableSize % 2 || !in(T.VTable, T.VTableSize))
      fail(T.VTable, What + ": bad vtable size " + std::to_string(T.VTableSize));
    if (T.TableSize < 4 || !in(Pos, T.TableSize))
      fail(Pos, What + ": table of " + std::to_string(T.TableSize) + " bytes runs past the end");
    for (size_t F = 4; F < T.VTableSize; F += 2)
      if (uint16_t O = read<uint16_t>(T.VTable + F); O && O >= T.TableSize)
        fail(T.VTable + F, What + ": field outside its table");
    return T;
  }

  /// The field's position, or 0 when absent.
  size_t field(const Table &T, uint16_t Slot) const {
    if (size_t(Slot) + 2 > T.VTableSize)
      return 0;
    uint16_t O = read<uint16_t>(T.VTable + Slot);
    return O ? T.Pos + O : 0;
  }

  template <typename V>
  V scalar(const Table &T, uint16_t Slot, V Default, const std::string &What) {
    size_t F = field(T, Slot);
    if (!F)
      return Default;
    if (F + sizeof(V) > T.Pos + T.TableSize)
      fail(F, What + ": field runs past its table");
    return read<V>(F);
  }

  /// The target of an offset field, or 0 when absent.
  size_t target(const Table &T, uint16_t Slot, const std::string &What) {
    size_t F = field(T, Slot);
    if (!F)
      return 0;
    if (F % 4 || F + 4 > T.Pos + T.TableSize)
      fail(F, What + ": offset field misaligned or past its table");
    uint64_t To = uint64_t(F) + read<uint32_t>(F);
    if (To >= Size)
      fail(F, What + ": points past the end of the " + std::to_string(Size) + "-byte file");
    return size_t(To);
  }

  Vector vectorAt(size_t At, size_t ElementSize, const std::string &What) {
    if (At % 4 || !in(At, 4))
      fail(At, What + ": vector length outside the file or misaligned");
    Vector V{At + 4, read<uint32_t>(At)};
    if (!in(V.Elements, uint64_t(V.Count) * ElementSize))
      fail(At, What + ": vector of " + std::to_string(V.Count) +
                   " elements runs past the end of the " + std::to_string(Size) + "-byte file");
    if (ElementSize > 1 && V.Elements % (ElementSize > 4 ? 8 : ElementSize) && V.Count)
      fail(At, What + ": vector elements misaligned");
    return V;
  }

  /// A vector field (absent: Count 0).
  Vector vector(const Table &T, uint16_t Slot, size_t ElementSize, const std::string &What) {
    size_t At = target(T, Slot, What);
    return At ? vectorAt(At, ElementSize, What) : Vector{};
  }

  /// A string field; Required: LiteRT reads it unconditionally.
  void string(const Table &T, uint16_t Slot, const std::string &What, bool Required = false) {
    size_t At = target(T, Slot, What);
    if (!At) {
      if (Required)
        fail(T.Pos, What + " is missing");
      return;
    }
    Vector V = vectorAt(At, 1, What);
    if (!in(V.Elements + V.Count, 1) || Data[V.Elements + V.Count] != 0)
      fail(At, What + ": string without its NUL terminator");
  }

  std::vector<Table> tables(const Table &T, uint16_t Slot, const std::string &What) {
    Vector V = vector(T, Slot, 4, What);
    std::vector<Table> Out;
    for (uint32_t I = 0; I < V.Count; ++I) {
      size_t E = V.Elements + 4 * size_t(I);
      uint64_t To = uint64_t(E) + read<uint32_t>(E);
      if (To >= Size)
        fail(E, What + " #" + std::to_string(I) + ": points past the end of the file");
      Out.push_back(table(size_t(To), What + " #" + std::to_string(I)));
    }
    return Out;
  }

  /// An index vector field, each index checked; returns them.
  std::vector<int32_t> indices(const Table &T, uint16_t Slot, int64_t Limit, bool AllowMinusOne,
                               const std::string &What) {
    Vector V = vector(T, Slot, 4, What);
    std::vector<int32_t> Out;
    for (uint32_t I = 0; I < V.Count; ++I) {
      int32_t X = read<int32_t>(V.Elements + 4 * size_t(I));
      if ((X < 0 && !(AllowMinusOne && X == -1)) || X >= Limit)
        fail(V.Elements + 4 * size_t(I), What + ": index " + std::to_string(X) +
                                             " out of range [0, " + std::to_string(Limit) + ")");
      Out.push_back(X);
    }
    return Out;
  }

  void refuse(const Table &T, uint16_t Slot, const std::string &What) {
    if (size_t F = field(T, Slot))
      fail(F, What + " (not supported by mlopt's policy runtime)");
  }

  void verify();

private:
  void verifySubgraph(const Table &G, size_t Index, const std::vector<Table> &Buffers,
                      size_t NumOpcodes);
  void verifyOptions(const Table &Op, const std::string &What);

  const uint8_t *Data;
  size_t Size;
  uint64_t TotalTensorBytes = 0;
};

void Verifier::verify() {
  if (Size < 8)
    fail(0, "too short for a flatbuffer (" + std::to_string(Size) + " bytes)");
  if (std::memcmp(Data + 4, "TFL3", 4) != 0)
    fail(4, "no TFL3 identifier");
  Table M = table(read<uint32_t>(0), "model");
  (void)scalar<uint32_t>(M, slot::ModelVersion, 0, "model version");
  std::vector<Table> Opcodes = tables(M, slot::OperatorCodes, "operator code");
  for (size_t I = 0; I < Opcodes.size(); ++I)
    string(Opcodes[I], slot::CustomCode, "operator code #" + std::to_string(I) + " custom code");
  std::vector<Table> Buffers = tables(M, slot::Buffers, "buffer");
  for (size_t I = 0; I < Buffers.size(); ++I) {
    std::string What = "buffer #" + std::to_string(I);
    (void)vector(Buffers[I], slot::Data, 1, What + " data");
    if (scalar<uint64_t>(Buffers[I], slot::BufferOffset, 0, What) > 1 ||
        scalar<uint64_t>(Buffers[I], slot::BufferSize, 0, What) > 0)
      fail(Buffers[I].Pos, What + ": data outside the flatbuffer (offset/size) is not supported");
  }
  string(M, slot::Description, "model description");
  indices(M, slot::MetadataBuffer, int64_t(Buffers.size()), false, "metadata buffer");
  std::vector<Table> Meta = tables(M, slot::Metadata, "metadata");
  for (size_t I = 0; I < Meta.size(); ++I) {
    string(Meta[I], slot::MetadataName, "metadata #" + std::to_string(I) + " name");
    if (scalar<uint32_t>(Meta[I], slot::MetadataBuffer_, 0, "metadata") >= Buffers.size())
      fail(Meta[I].Pos, "metadata #" + std::to_string(I) + ": buffer index out of range");
  }
  refuse(M, slot::ExternalBufferGroups, "external buffer groups");
  refuse(M, slot::ExternalBuffers, "external buffers");

  std::vector<Table> Subgraphs = tables(M, slot::Subgraphs, "subgraph");
  if (Subgraphs.empty())
    fail(M.Pos, "model has no subgraph");
  std::vector<size_t> TensorCounts;
  for (size_t I = 0; I < Subgraphs.size(); ++I) {
    verifySubgraph(Subgraphs[I], I, Buffers, Opcodes.size());
    TensorCounts.push_back(vector(Subgraphs[I], slot::Tensors, 4, "tensors").Count);
  }

  std::vector<Table> Signatures = tables(M, slot::SignatureDefs, "signature");
  for (size_t I = 0; I < Signatures.size(); ++I) {
    std::string What = "signature #" + std::to_string(I);
    string(Signatures[I], slot::SignatureKey, What + " key", /*Required=*/true);
    uint32_t Sub = scalar<uint32_t>(Signatures[I], slot::SubgraphIndex, 0, What);
    if (Sub >= Subgraphs.size())
      fail(Signatures[I].Pos, What + ": subgraph index " + std::to_string(Sub) + " out of range");
    for (uint16_t S : {uint16_t(slot::SigInputs), uint16_t(slot::SigOutputs)}) {
      std::vector<Table> Maps =
          tables(Signatures[I], S, What + (S == slot::SigInputs ? " input" : " output"));
      for (const Table &Map : Maps) {
        string(Map, slot::MapName, What + " tensor name", /*Required=*/true);
        if (scalar<uint32_t>(Map, slot::TensorIndex, 0, What) >= TensorCounts[Sub])
          fail(Map.Pos, What + ": tensor index out of range");
      }
    }
  }
}

void Verifier::verifySubgraph(const Table &G, size_t Index, const std::vector<Table> &Buffers,
                              size_t NumOpcodes) {
  std::string Where = "subgraph #" + std::to_string(Index);
  std::vector<Table> Tensors = tables(G, slot::Tensors, Where + " tensor");
  int64_t NumTensors = int64_t(Tensors.size());
  // Dataflow: a tensor is a constant, a subgraph input, a variable or
  // written by exactly one earlier operator; nothing writes a constant or an
  // input (LiteRT would write into the read-only model, found by fuzzing).
  enum TensorState : uint8_t { Unwritten, Constant, Written };
  std::vector<TensorState> State(Tensors.size(), Unwritten);
  for (size_t I = 0; I < Tensors.size(); ++I) {
    const Table &T = Tensors[I];
    std::string What = Where + " tensor #" + std::to_string(I);
    Vector Shape = vector(T, slot::Shape, 4, What + " shape");
    uint64_t Elements = 1;
    for (uint32_t D = 0; D < Shape.Count; ++D) {
      int32_t Dim = read<int32_t>(Shape.Elements + 4 * size_t(D));
      if (Dim < 0)
        fail(Shape.Elements + 4 * size_t(D), What + ": negative dimension " + std::to_string(Dim));
      Elements *= uint64_t(Dim);
      if (Elements >= (uint64_t(1) << 31))
        fail(Shape.Elements, What + ": 2^31 or more elements");
    }
    int8_t Type = scalar<int8_t>(T, slot::Type, 0, What);
    if (Type < 0 || Type > 20)
      fail(T.Pos, What + ": unknown element type " + std::to_string(Type));
    // A policy's tensors are small; a model asking for gigabytes would make
    // the compiler allocate them (LiteRT's arena, mlopt's host buffers).
    uint64_t Bytes = Elements * std::max<size_t>(tfliteTypeSize(Type), 1);
    if (Bytes > MaxTensorBytes)
      fail(T.Pos, What + ": " + std::to_string(Bytes) +
                      " bytes (a policy tensor may have at most " +
                      std::to_string(MaxTensorBytes >> 20) + " MiB)");
    TotalTensorBytes += Bytes;
    if (TotalTensorBytes > MaxTotalTensorBytes)
      fail(T.Pos, What + ": the model's tensors exceed " +
                      std::to_string(MaxTotalTensorBytes >> 20) + " MiB in all");
    uint32_t Buf = scalar<uint32_t>(T, slot::BufferIndex, 0, What);
    if (Buf >= Buffers.size())
      fail(T.Pos, What + ": buffer index " + std::to_string(Buf) + " out of range");
    size_t Have = vector(Buffers[Buf], slot::Data, 1, "buffer data").Count;
    if (Buf != 0 && Have)
      State[I] = Constant;
    if (scalar<uint8_t>(T, 14, 0, What)) // is_variable
      State[I] = Written;
    if (Buf != 0 && Have && tfliteTypeSize(Type) && Have != Elements * tfliteTypeSize(Type))
      fail(Buffers[Buf].Pos, What + ": constant data of " + std::to_string(Have) +
                                 " bytes, its shape needs " +
                                 std::to_string(Elements * tfliteTypeSize(Type)));
    string(T, slot::TensorName, What + " name", /*Required=*/true);
    if (size_t Q = target(T, slot::Quantization, What + " quantization")) {
      Table QT = table(Q, What + " quantization");
      (void)vector(QT, slot::Min, 4, What + " quantization min");
      (void)vector(QT, slot::Max, 4, What + " quantization max");
      (void)vector(QT, slot::Scale, 4, What + " quantization scale");
      (void)vector(QT, slot::ZeroPoint, 8, What + " quantization zero point");
      if (scalar<uint8_t>(QT, slot::DetailsType, 0, What))
        fail(QT.Pos, What + ": quantization details (not supported by mlopt's policy runtime)");
    }
    refuse(T, slot::Sparsity, What + ": sparse tensor");
    (void)vector(T, slot::ShapeSignature, 4, What + " shape signature");
    refuse(T, slot::VariantTensors, What + ": variant tensor");
    if (scalar<uint32_t>(T, slot::ExternalBuffer, 0, What))
      fail(T.Pos, What + ": external buffer (not supported by mlopt's policy runtime)");
  }
  for (int32_t In : indices(G, slot::Inputs, NumTensors, false, Where + " inputs")) {
    if (State[size_t(In)] == Constant)
      fail(G.Pos, Where + ": input tensor #" + std::to_string(In) + " has constant data");
    State[size_t(In)] = Written;
  }
  std::vector<int32_t> Outputs = indices(G, slot::Outputs, NumTensors, false, Where + " outputs");
  string(G, slot::Name, Where + " name");
  std::vector<Table> Ops = tables(G, slot::Operators, Where + " operator");
  for (size_t I = 0; I < Ops.size(); ++I) {
    const Table &Op = Ops[I];
    std::string What = Where + " operator #" + std::to_string(I);
    uint32_t Code = scalar<uint32_t>(Op, slot::OpcodeIndex, 0, What);
    if (Code >= NumOpcodes)
      fail(Op.Pos, What + ": operator code index " + std::to_string(Code) + " out of range");
    for (int32_t In : indices(Op, slot::OpInputs, NumTensors, true, What + " inputs"))
      if (In >= 0 && State[size_t(In)] == Unwritten)
        fail(Op.Pos, What + ": reads tensor #" + std::to_string(In) + " before anything writes it");
    for (int32_t Out : indices(Op, slot::OpOutputs, NumTensors, false, What + " outputs")) {
      if (State[size_t(Out)] != Unwritten)
        fail(Op.Pos, What + ": writes tensor #" + std::to_string(Out) + ", which is " +
                         (State[size_t(Out)] == Constant ? "a constant" : "already written"));
      State[size_t(Out)] = Written;
    }
    indices(Op, slot::Intermediates, NumTensors, false, What + " intermediates");
    (void)vector(Op, slot::MutatingVariableInputs, 1, What + " mutating inputs");
    verifyOptions(Op, What);
    refuse(Op, slot::CustomOptions, What + ": custom options");
    if (scalar<uint64_t>(Op, slot::LargeCustomOffset, 0, What) ||
        scalar<uint64_t>(Op, slot::LargeCustomSize, 0, What))
      fail(Op.Pos, What + ": large custom options (not supported by mlopt's policy runtime)");
    if (scalar<uint8_t>(Op, slot::Options2Type, 0, What))
      fail(Op.Pos, What + ": BuiltinOptions2 (not supported by mlopt's policy runtime)");
  }
  for (int32_t Out : Outputs)
    if (State[size_t(Out)] == Unwritten)
      fail(G.Pos, Where + ": output tensor #" + std::to_string(Out) + " is never written");
}

void Verifier::verifyOptions(const Table &Op, const std::string &What) {
  uint8_t Type = scalar<uint8_t>(Op, slot::OptionsType, 0, What);
  size_t At = target(Op, slot::Options, What + " options");
  if (!Type || !At)
    return;
  // BuiltinOptions union members (schema order). Six of them hold offsets;
  // every other known member holds scalars only.
  enum : uint8_t {
    ConcatEmbeddings = 3,
    FullyConnected = 8,
    Reshape = 17,
    Squeeze = 30,
    VarHandle = 111,
    Bucketize = 115,
    LastKnown = 126
  };
  if (Type > LastKnown)
    fail(Op.Pos, What + ": unknown builtin options type " + std::to_string(Type));
  Table O = table(At, What + " options");
  switch (Type) {
  case ConcatEmbeddings:
    (void)vector(O, 6, 4, What + " options");
    (void)vector(O, 8, 4, What + " options");
    break;
  case FullyConnected:
    (void)vector(O, 14, 1, What + " options");
    break;
  case Reshape:
  case Squeeze:
  case Bucketize:
    (void)vector(O, 4, 4, What + " options");
    break;
  case VarHandle:
    string(O, 4, What + " options");
    string(O, 6, What + " options");
    break;
  default:
    break; // scalars only: table() checked every field lies inside the table
  }
}

} // namespace

std::string tfliteModelProblem(const uint8_t *Data, size_t Size) {
  try {
    Verifier(Data, Size).verify();
    return "";
  } catch (const Problem &P) {
    return "byte " + std::to_string(P.Offset) + ": " + P.What;
  } catch (const std::exception &E) { // bad_alloc on a huge tensor list
    return E.what();
  }
}

} // namespace mlopt
