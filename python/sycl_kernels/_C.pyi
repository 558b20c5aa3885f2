"""sycl_kernels host module: queues, device images and kernel launches"""

from collections.abc import Sequence


def runtime_version() -> str: ...

def native_backends() -> list[str]:
    """The backends whose native binaries this build keeps and loads."""

def live_objects() -> dict:
    """
    How many Queue, Bundle and Kernel objects are alive (C++ copies included).
    """

def devices() -> list:
    """Every SYCL device the runtime sees, as dicts."""

class Queue:
    @staticmethod
    def create(device_index: int) -> Queue:
        """An owned in-order queue on device `device_index`."""

    @staticmethod
    def borrow(address: int) -> Queue:
        """Wraps a `sycl::queue*` given as an int (torch.xpu stream.sycl_queue)."""

    @property
    def address(self) -> int: ...

    @property
    def blocking(self) -> bool: ...

    @property
    def device(self) -> dict: ...

    def wait(self) -> None: ...

class Bundle:
    def __init__(self, queue: Queue, image: bytes, format: str) -> None:
        """Loads a device image (bytes of `format`) for the queue's device."""

    @staticmethod
    def from_native(queue: Queue, binary: bytes) -> Bundle:
        """
        Loads the native binary another bundle gave for this device and driver.
        """

    def native_binary(self) -> bytes:
        """
        The device's native binary of this bundle; b'' where the backend gives none.
        """

class Kernel:
    def __init__(self, bundle: Bundle, name: str, signature: str, group_size: int = 0) -> None:
        """
        Kernel `name` of a loaded image. `signature` has one letter per parameter:
        p pointer (a tensor), i int32, l int64, f float, d double. `group_size` is the
        work-group size it was compiled for (0: any).
        """

    @property
    def name(self) -> str: ...

    @property
    def signature(self) -> str: ...

    @property
    def group_size(self) -> int: ...

    def launch(self, queue: Queue, global_size: int, local_size: int, *args) -> None:
        """
        Submits the kernel on `queue` (and waits if the queue is blocking); pointer
        arguments are tensors, checked to be on the queue's device.
        """

    def _bind(self, queue: Queue, global_size: int, local_size: int, params: Sequence) -> BoundLaunch:
        """
        A launch with every parameter bound, in order: values for scalars (kinds
        checked), (argument index, byte offset) for pointers, read from the call's
        tensors unchecked: for the ops only (ops/_launch.py), after their checks.
        """

class BoundLaunch:
    def __call__(self, *call) -> None:
        """Launches, the pointers read from the call's tensors."""
