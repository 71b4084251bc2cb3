"""MLGO training logs: read them into numpy, stream them, write them.

- :func:`read_log` / :class:`Log`: a whole log, one contiguous array per feature;
- :class:`LogStream` / :class:`StreamDecoder`: records as their bytes arrive;
- :class:`LogWriter`: LLVM 19's exact bytes.
"""

from .columns import Log, LogView, read_log
from .header import LogHeader, TensorSpec
from .stream import ContextSwitch, LogStream, Observation, StreamDecoder, StreamHeader, StreamSchema
from .writer import LogWriter

__all__ = ["ContextSwitch", "Log", "LogHeader", "LogStream", "LogView", "LogWriter", "Observation",
           "StreamDecoder", "StreamHeader", "StreamSchema", "TensorSpec", "read_log"]
