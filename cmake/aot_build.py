"""cmake/aot_build.py: runs sycl_kernels.toolchain.aot_build from the source tree for CMake.

The package's __init__ loads torch and the SYCL runtime, which the wheel's build
environment does not have (or has in another version); the AOT steps need only
the torch-free catalog and toolchain (sycl_kernels.specs, sycl_kernels.toolchain). So
the package is entered through a stub that skips its __init__.
"""

import sys
import types
from pathlib import Path

package = types.ModuleType("sycl_kernels")
package.__path__ = [str(Path(__file__).resolve().parent.parent / "python" / "sycl_kernels")]
sys.modules["sycl_kernels"] = package

from sycl_kernels.toolchain.aot_build import main  # noqa: E402

raise SystemExit(main())
