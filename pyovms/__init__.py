"""`pyovms`, the module OVMS gives the scripts of Python nodes: `from pyovms import Tensor`.

graphrt installs it, so handler scripts written for OVMS import it unchanged; the type itself is
servables.python_model.tensor.Tensor.
"""

from servables.python_model.tensor import Tensor

__all__ = ["Tensor"]
