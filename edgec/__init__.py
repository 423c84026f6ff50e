"""edgec: ONNX models to fast, dependency-free C on small boards.

The command line (edgec.cli) is a thin layer over these library entry points;
anything the CLI does can be done from Python.
"""

__version__ = "0.1.0"

from edgec.errors import EdgecError  # noqa: E402

__all__ = ["EdgecError", "__version__"]
