"""Ahead-of-time compilation of a .tflite policy into a shared object.

    mlopt policy compile model_dir -o policy.so
    opt-19 -load-pass-plugin=$(mlopt plugin-path) -mlopt-inline-model=policy.so ...

The .tflite graph is read with the flatbuffer schema shipped in ai-edge-litert,
each operator becomes a few lines of C++ (constants as hex-float literals, so
weights are bit-exact), and the system C++ compiler builds a .so exporting
mlopt's versioned C ABI (see src/core/CompiledPolicy.h). No TensorFlow, no
LLVM rebuild, no LiteRT at run time. Evaluation is single-row, reentrant
(all intermediates on the stack) and allocation-free.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..errors import ModelFormatError, OutputExistsError, PolicyCompileError
from ..tflite.reader import TYPES, TfliteModel

ABI_VERSION = 1

_ACTIVATIONS = {0: None, 1: "relu", 2: "relu_n1_to_1", 3: "relu6"}

SUPPORTED = ("ADD", "ARG_MAX", "BUCKETIZE", "CAST", "CONCATENATION", "EXPAND_DIMS", "FULLY_CONNECTED",
             "LOGISTIC", "MUL", "RELU", "RESHAPE", "SQUEEZE", "SUB", "TANH")


def _literal(value, ctype: str) -> str:
    if ctype == "float":
        v = float(np.float32(value))
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        return f"{v.hex()}f" if not math.isnan(v) else "NAN"
    if ctype == "double":
        v = float(value)
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        return v.hex() if not math.isnan(v) else "NAN"
    if ctype == "bool":
        return "true" if value else "false"
    if ctype == "int64_t":
        v = int(value)
        return f"INT64_C({v})" if v != -(2**63) else "INT64_MIN"
    return str(int(value))


def _broadcast_index_code(out_shape, in_shape, var: str) -> str:
    """C++ expression: flat index into a tensor of in_shape broadcast to out_shape, from flat `var`."""
    if list(in_shape) == list(out_shape):
        return var
    if int(np.prod(in_shape, dtype=np.int64)) == 1:
        return "0"
    rank = len(out_shape)
    padded = [1] * (rank - len(in_shape)) + list(in_shape)
    terms, in_stride = [], 1
    out_strides = [int(np.prod(out_shape[i + 1:], dtype=np.int64)) for i in range(rank)]
    for d in reversed(range(rank)):
        if padded[d] != 1:
            terms.append(f"(({var} / {out_strides[d]}) % {out_shape[d]}) * {in_stride}")
        in_stride *= padded[d]
    return " + ".join(terms) or "0"


def _activation(code: str, act: int | None) -> str:
    kind = _ACTIVATIONS.get(act or 0, "?")
    if kind == "?":
        raise PolicyCompileError(f"fused activation {act} is not supported")
    if kind is None:
        return code
    if kind == "relu":
        return f"mlopt_relu({code})"
    if kind == "relu6":
        return f"std::min(mlopt_relu({code}), 6.0f)"
    return f"std::max(-1.0f, std::min({code}, 1.0f))"


def _ctype(g: TfliteModel, t: int) -> str:
    return g.type_entry(t)[0]


def generate_source(model: str | os.PathLike) -> str:
    """The C++ source of the compiled policy (for inspection; see compile_policy)."""
    try:
        return _generate(TfliteModel(Path(model)))
    except ModelFormatError as e:
        raise PolicyCompileError(str(e)) from None


def _generate(g: TfliteModel) -> str:
    lines: list[str] = []
    consts: list[str] = []
    declared: set[int] = set()
    input_index = {t: k for k, (_, t) in enumerate(g.inputs)}
    output_index = {t: k for k, (_, t) in enumerate(g.outputs)}

    def ref(t: int) -> str:
        if t in declared:
            return f"t{t}"
        data = g.constant(t)
        if data is not None:
            ctype = _ctype(g, t)
            flat = data.reshape(-1)
            values = ", ".join(_literal(v, ctype) for v in flat) or _literal(0, ctype)
            consts.append(f"static const {ctype} t{t}[{max(len(flat), 1)}] = {{{values}}};")
            declared.add(t)
            return f"t{t}"
        if t in input_index:
            lines.append(f"  const {_ctype(g, t)} *t{t} = static_cast<const {_ctype(g, t)} *>(in[{input_index[t]}]);")
            declared.add(t)
            return f"t{t}"
        raise PolicyCompileError(f"{g.file}: tensor '{g.name(t)}' is read before it is computed")

    def out(t: int) -> str:
        if t in output_index:
            lines.append(f"  {_ctype(g, t)} *t{t} = static_cast<{_ctype(g, t)} *>(out[{output_index[t]}]);")
        else:
            lines.append(f"  {_ctype(g, t)} t{t}[{max(g.size(t), 1)}];")
        declared.add(t)
        return f"t{t}"

    for i, op in enumerate(g.ops):
        name = g.op_names[op.opcodeIndex]
        ins = [int(x) for x in (op.inputs if op.inputs is not None else [])]
        outs = [int(x) for x in op.outputs]
        opts = op.builtinOptions
        where = f"{g.file}: operator #{i} ({name})"
        if name not in SUPPORTED:
            raise PolicyCompileError(f"{g.file}: operator {name} (operator #{i}, output '{g.name(outs[0])}') is "
                                     f"not supported by mlopt policy compile; supported: {', '.join(SUPPORTED)}")
        lines.append(f"  // #{i} {name} -> {g.name(outs[0])}")
        o = outs[0]
        n = g.size(o)
        if name in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
            src = ref(ins[0])
            dst = out(o)
            lines.append(f"  std::memcpy({dst}, {src}, sizeof({_ctype(g, o)}) * {n});")
        elif name == "CAST":
            src = ref(ins[0])
            dst = out(o)
            lines.append(f"  for (int i = 0; i < {n}; ++i) {dst}[i] = static_cast<{_ctype(g, o)}>({src}[i]);")
        elif name == "CONCATENATION":
            axis = opts.axis if opts is not None else 0
            shape = g.shape(o)
            axis = axis + len(shape) if axis < 0 else axis
            outer = int(np.prod(shape[:axis], dtype=np.int64))
            srcs = [ref(t) for t in ins]
            dst = out(o)
            at = 0
            total_inner = int(np.prod(shape[axis:], dtype=np.int64))
            for t, src in zip(ins, srcs):
                inner = int(np.prod(g.shape(t)[axis:], dtype=np.int64)) if g.shape(t) else 1
                lines.append(f"  for (int o = 0; o < {outer}; ++o) std::memcpy({dst} + o * {total_inner} + {at}, "
                             f"{src} + o * {inner}, sizeof({_ctype(g, o)}) * {inner});")
                at += inner
            if opts is not None and opts.fusedActivationFunction:
                raise PolicyCompileError(f"{where}: fused activation on CONCATENATION is not supported")
        elif name == "BUCKETIZE":
            boundaries = np.asarray(opts.boundaries if opts is not None and opts.boundaries is not None else [],
                                    dtype=np.float32)
            if np.any(np.diff(boundaries) < 0):
                raise PolicyCompileError(f"{where}: boundaries are not sorted")
            src = ref(ins[0])
            bname = f"b{i}"
            consts.append(f"static const float {bname}[{max(len(boundaries), 1)}] = "
                          f"{{{', '.join(_literal(v, 'float') for v in boundaries) or '0.0f'}}};")
            dst = out(o)
            lines.append(f"  for (int i = 0; i < {n}; ++i) {dst}[i] = static_cast<{_ctype(g, o)}>("
                         f"std::upper_bound({bname}, {bname} + {len(boundaries)}, {src}[i]) - {bname});")
        elif name in ("ADD", "MUL", "SUB"):
            a, b = ref(ins[0]), ref(ins[1])
            dst = out(o)
            sym = {"ADD": "+", "MUL": "*", "SUB": "-"}[name]
            ia = _broadcast_index_code(g.shape(o), g.shape(ins[0]), "i")
            ib = _broadcast_index_code(g.shape(o), g.shape(ins[1]), "i")
            act = opts.fusedActivationFunction if opts is not None else 0
            expr = f"{a}[{ia}] {sym} {b}[{ib}]"
            if act:
                if _ctype(g, o) != "float":
                    raise PolicyCompileError(f"{where}: fused activation on a non-float tensor")
                expr = _activation(f"({expr})", act)
            lines.append(f"  for (int i = 0; i < {n}; ++i) {dst}[i] = static_cast<{_ctype(g, o)}>({expr});")
        elif name in ("RELU", "TANH", "LOGISTIC"):
            src = ref(ins[0])
            dst = out(o)
            fn = {"RELU": "mlopt_relu(x)", "TANH": "std::tanh(x)", "LOGISTIC": "1.0f / (1.0f + std::exp(-x))"}[name]
            lines.append(f"  for (int i = 0; i < {n}; ++i) {{ float x = {src}[i]; {dst}[i] = {fn}; }}")
        elif name == "FULLY_CONNECTED":
            if any(_ctype(g, t) != "float" for t in ins if t >= 0) or _ctype(g, o) != "float":
                raise PolicyCompileError(f"{where}: only float FULLY_CONNECTED is supported (no quantization)")
            x, w = ref(ins[0]), ref(ins[1])
            bias = ref(ins[2]) if len(ins) > 2 and ins[2] >= 0 else None
            n_out, n_in = g.shape(ins[1])
            batch = g.size(ins[0]) // n_in
            dst = out(o)
            act = opts.fusedActivationFunction if opts is not None else 0
            acc = _activation("acc", act)
            lines.append(f"  for (int r = 0; r < {batch}; ++r) for (int j = 0; j < {n_out}; ++j) {{")
            lines.append(f"    float acc = {bias + '[j]' if bias else '0.0f'};")
            lines.append(f"    const float *row = {w} + j * {n_in}; const float *v = {x} + r * {n_in};")
            lines.append(f"    acc += mlopt_dot<{n_in}>(v, row); {dst}[r * {n_out} + j] = {acc};")
            lines.append("  }")
        elif name == "ARG_MAX":
            src = ref(ins[0])
            axis_data = g.constant(ins[1])
            if axis_data is None:
                raise PolicyCompileError(f"{where}: the axis must be a constant")
            shape = g.shape(ins[0])
            axis = int(axis_data.reshape(-1)[0])
            axis = axis + len(shape) if axis < 0 else axis
            outer = int(np.prod(shape[:axis], dtype=np.int64))
            length = shape[axis]
            inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
            dst = out(o)
            lines.append(f"  for (int a = 0; a < {outer}; ++a) for (int c = 0; c < {inner}; ++c) {{")
            lines.append(f"    int best = 0; for (int k = 1; k < {length}; ++k)")
            at_k, at_best = f"(a * {length} + k) * {inner} + c", f"(a * {length} + best) * {inner} + c"
            lines.append(f"      if ({src}[{at_k}] > {src}[{at_best}]) best = k;")
            lines.append(f"    {dst}[a * {inner} + c] = best;")
            lines.append("  }")
        if len(outs) > 1:
            raise PolicyCompileError(f"{where}: operators with several outputs are not supported")

    # Signature outputs that no operator wrote (an input or a constant).
    for k, (_, t) in enumerate(g.outputs):
        if t not in declared or t in input_index:
            src = ref(t)
            lines.append(f"  std::memcpy(out[{k}], {src}, sizeof({_ctype(g, t)}) * {g.size(t)});")

    def tensor_json(sig_name: str, t: int) -> dict:
        return {"signature_name": sig_name, "tensor_name": g.name(t), "type": TYPES[g.tensors[t].type][2],
                "shape": g.shape(t)}

    signature = json.dumps({
        "inputs": [tensor_json(nm, t) for nm, t in g.inputs],
        "outputs": [tensor_json(nm, t) for nm, t in g.outputs],
        "output_spec": g.output_spec,
    }, separators=(",", ":"))
    c_string = json.dumps(signature)  # a valid C string literal for ASCII JSON
    return "\n".join([
        "// Generated by `mlopt policy compile`; do not edit. mlopt compiled policy ABI v1.",
        "#include <algorithm>", "#include <cmath>", "#include <cstdint>", "#include <cstring>", "",
        "namespace {",
        "inline float mlopt_relu(float x) { return x > 0.0f ? x : 0.0f; }",
        "// Dot product with 8 interleaved partial sums (vectorizable, and a fixed order:",
        "// the same bits on every run and machine).",
        "template <int N> inline float mlopt_dot(const float *a, const float *b) {",
        "  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};",
        "  int k = 0;",
        "  for (; k + 8 <= N; k += 8)",
        "    for (int j = 0; j < 8; ++j) s[j] += a[k + j] * b[k + j];",
        "  float tail = 0.0f;",
        "  for (; k < N; ++k) tail += a[k] * b[k];",
        "  return (((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))) + tail;",
        "}",
        *consts,
        "}  // namespace", "",
        '#define MLOPT_EXPORT extern "C" __attribute__((visibility("default")))',
        f"MLOPT_EXPORT int mlopt_policy_abi_version(void) {{ return {ABI_VERSION}; }}",
        f"MLOPT_EXPORT const char *mlopt_policy_signature(void) {{ return {c_string}; }}",
        "MLOPT_EXPORT int mlopt_policy_evaluate(const void *const *in, void *const *out) {",
        *lines,
        "  return 0;",
        "}", "",
    ])


def compile_policy(model: str | os.PathLike, output: str | os.PathLike, *, cxx: str | None = None,
                   overwrite: bool = False, keep_source: bool = False) -> Path:
    """Compile `model` (.tflite file or model directory) into the shared object `output`."""
    output = Path(output)
    if output.exists() and not overwrite:
        raise OutputExistsError(output)
    source = generate_source(model)
    compiler = cxx or os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not compiler:
        raise PolicyCompileError("no C++ compiler found (install g++ or set CXX)")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlopt-policy-") as tmp:
        src = Path(tmp) / "policy.cpp"
        src.write_text(source)
        tmp_out = Path(tmp) / "policy.so"
        # -ffp-contract=off: no fused multiply-add (clang fuses by default where the target has
        # one), so every compiler and machine gives the same bits, numpy's forward pass's
        # (mlopt.policy.dense sums in mlopt_dot's order).
        cmd = [compiler, "-std=c++17", "-O3", "-ffp-contract=off", "-fPIC", "-shared", "-fvisibility=hidden",
               "-fno-math-errno", str(src), "-o", str(tmp_out)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            first = next((ln for ln in result.stderr.splitlines() if "error" in ln), result.stderr.strip()[:200])
            raise PolicyCompileError(f"{compiler} failed on the generated policy: {first}")
        if keep_source:
            shutil.copyfile(src, output.with_suffix(".cpp"))
        shutil.move(str(tmp_out), output)
    return output
