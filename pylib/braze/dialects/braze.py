"""Op classes of the braze dialect, generated from dialects/BrazeOps.td.

Importing this module makes every new `mlir.ir.Context` know the dialect.
"""

from braze import _native  # noqa: F401  (registers the dialect)
from braze.dialects._braze_ops_gen import *  # noqa: F401,F403
