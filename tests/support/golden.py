"""The worked 247-byte example of llvm-mlgo.md section 4.4 (a log with two
features, a score, one context and one observation), byte for byte."""

HEADER = (
    b'{"features":[{"name":"a","type":"int64_t","port":0,"shape":[1]},'
    b'{"name":"b","type":"float","port":0,"shape":[2]}],'
    b'"score":{"name":"reward","type":"float","port":0,"shape":[1]}}\n'
)
BODY = bytes.fromhex(
    "7b22636f6e74657874223a2266227d0a"
    "7b226f62736572766174696f6e223a30"
    "7d0a050000000000000000 00c03f0000".replace(" ", "")
    + "00c00a7b226f7574636f6d65223a307d"
    "0a0000803e0a"
)
GOLDEN = HEADER + BODY
