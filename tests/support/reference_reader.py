"""An independent, deliberately plain pure-Python MLGO log reader (tests only).

It shares no code with mlopt: JSON via the json module, tensors sliced by the
sizes in the header. Returns raw bytes so comparisons are exact (NaNs too).
"""

from __future__ import annotations

import io
import json
import math

SIZES = {
    "float": 4, "double": 8, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2,
    "int32_t": 4, "uint32_t": 4, "int64_t": 8, "uint64_t": 8,
}


def spec_bytes(spec: dict) -> int:
    return SIZES[spec["type"]] * math.prod(spec["shape"])


def read(data: bytes):
    """Returns (header dict, contexts in first-seen order, rows).

    Each row is (context, observation_id, [feature bytes], score bytes|None).
    """
    f = io.BytesIO(data)
    line = f.readline()
    if not line:
        return None, [], []
    header = json.loads(line)
    features = header["features"]
    score = header.get("score")
    contexts, rows, context = [], [], None
    while True:
        line = f.readline()
        if not line:
            break
        record = json.loads(line)
        if "context" in record:
            context = record["context"]
            if context not in contexts:
                contexts.append(context)
            continue
        oid = record["observation"]
        values = [f.read(spec_bytes(s)) for s in features]
        assert f.read(1) == b"\n"
        score_bytes = None
        if score is not None:
            outcome = json.loads(f.readline())
            assert outcome["outcome"] == oid
            score_bytes = f.read(spec_bytes(score))
            assert f.read(1) == b"\n"
        rows.append((context, oid, values, score_bytes))
    return header, contexts, rows
