#include "TensorSpec.h"

#include <climits>

namespace mlopt {

namespace {
struct TypeInfo {
  TensorType Type;
  const char *Name;
  size_t Size;
  char NumpyChar;
};
const TypeInfo Types[] = {
    {TensorType::Float, "float", 4, 'f'},   {TensorType::Double, "double", 8, 'd'},
    {TensorType::Int8, "int8_t", 1, 'b'},   {TensorType::UInt8, "uint8_t", 1, 'B'},
    {TensorType::Int16, "int16_t", 2, 'h'}, {TensorType::UInt16, "uint16_t", 2, 'H'},
    {TensorType::Int32, "int32_t", 4, 'i'}, {TensorType::UInt32, "uint32_t", 4, 'I'},
    {TensorType::Int64, "int64_t", 8, 'q'}, {TensorType::UInt64, "uint64_t", 8, 'Q'},
};
const TypeInfo *info(TensorType T) {
  for (const TypeInfo &I : Types)
    if (I.Type == T)
      return &I;
  return nullptr;
}
constexpr size_t MaxTensorBytes = size_t(1) << 40;
constexpr size_t MaxRank = 32; // numpy allows 64 dimensions; a column adds one
} // namespace

const char *tensorTypeName(TensorType T) {
  const TypeInfo *I = info(T);
  return I ? I->Name : "INVALID";
}

std::optional<TensorType> tensorTypeFromName(std::string_view Name) {
  for (const TypeInfo &I : Types)
    if (Name == I.Name)
      return I.Type;
  return std::nullopt;
}

size_t tensorTypeSize(TensorType T) {
  const TypeInfo *I = info(T);
  return I ? I->Size : 0;
}

char tensorTypeNumpyChar(TensorType T) {
  const TypeInfo *I = info(T);
  return I ? I->NumpyChar : '?';
}

TensorSpec::TensorSpec(std::string Name, TensorType Type, std::vector<int64_t> Shape, int Port)
    : Name(std::move(Name)), Port(Port), Type(Type), Shape(std::move(Shape)), ElementCount(1) {
  if (!info(Type))
    throw SpecError("tensor '" + this->Name + "': invalid element type");
  if (this->Shape.size() > MaxRank)
    throw SpecError("tensor '" + this->Name + "': " + std::to_string(this->Shape.size()) +
                    " dimensions (at most " + std::to_string(MaxRank) + ")");
  for (int64_t D : this->Shape) {
    if (D < 0)
      throw SpecError("tensor '" + this->Name + "': negative dimension " + std::to_string(D));
    if (D != 0 && ElementCount > MaxTensorBytes / size_t(D))
      throw SpecError("tensor '" + this->Name + "': shape too large");
    ElementCount *= size_t(D);
  }
  if (ElementCount > MaxTensorBytes / tensorTypeSize(Type))
    throw SpecError("tensor '" + this->Name + "': shape too large");
}

TensorSpec::TensorSpec(std::string NewName, const TensorSpec &Other) : TensorSpec(Other) {
  Name = std::move(NewName);
}

void TensorSpec::appendJSON(std::string &Out) const {
  Out += "{\"name\":";
  json::appendQuoted(Out, Name);
  Out += ",\"type\":\"";
  Out += tensorTypeName(Type);
  Out += "\",\"port\":";
  Out += std::to_string(Port);
  Out += ",\"shape\":[";
  for (size_t I = 0; I < Shape.size(); ++I) {
    if (I)
      Out += ',';
    Out += std::to_string(Shape[I]);
  }
  Out += "]}";
}

std::string TensorSpec::toJSON() const {
  std::string Out;
  appendJSON(Out);
  return Out;
}

TensorSpec TensorSpec::fromJSON(const json::Value &V) {
  if (!V.isObject())
    throw SpecError("tensor spec is not a JSON object");
  const json::Value *Name = V.get("name");
  if (!Name || !Name->isString())
    throw SpecError("tensor spec needs a string 'name'");
  const std::string &N = Name->asString();
  auto Where = [&](const std::string &What) { return "tensor spec '" + N + "': " + What; };
  const json::Value *Type = V.get("type");
  if (!Type || !Type->isString())
    throw SpecError(Where("needs a string 'type'"));
  std::optional<TensorType> T = tensorTypeFromName(Type->asString());
  if (!T)
    throw SpecError(Where("unknown tensor type '" + Type->asString() +
                          "' (expected one of float, double, int8_t, "
                          "uint8_t, int16_t, uint16_t, int32_t, uint32_t, "
                          "int64_t, uint64_t)"));
  const json::Value *Port = V.get("port");
  if (!Port || !Port->isInt() || Port->asInt() < INT_MIN || Port->asInt() > INT_MAX)
    throw SpecError(Where("needs an integer 'port'"));
  const json::Value *Shape = V.get("shape");
  if (!Shape || !Shape->isArray())
    throw SpecError(Where("needs an array 'shape'"));
  std::vector<int64_t> Dims;
  for (const json::Value &D : Shape->asArray()) {
    if (!D.isInt())
      throw SpecError(Where("'shape' must hold integers"));
    Dims.push_back(D.asInt());
  }
  return TensorSpec(N, *T, std::move(Dims), int(Port->asInt()));
}

std::string TensorSpec::typeAndShape() const {
  std::string Out = std::string(tensorTypeName(Type)) + " [";
  for (size_t I = 0; I < Shape.size(); ++I)
    Out += (I ? "," : "") + std::to_string(Shape[I]);
  return Out + "]";
}

} // namespace mlopt
