"""lockd: Python client of the lockd distributed lock service.

    import lockd

    client = lockd.Client("127.0.0.1:7411")
    with client.lock("orders/42", ttl=10, wait=5) as lease:
        charge(order, fencing_token=lease.fencing_token)

    with client.shared_lock("catalog", wait=5) as lease: ...      # a reader
    with client.semaphore("api", limit=4).hold(1, wait=5): ...    # 1 of 4 permits
    with client.lock_all(["acct/1", "acct/2"], wait=5) as leases: ...  # all or nothing

See lockd.client for the guarantees: locks bound to a Session stream that
lockd renews and resumes after a reconnect (the default), or the unary path
(send-time validity, one watchdog thread per Client renewing every ttl/3);
lost detection, safe retries.
"""

from lockd._auth import tls_credentials
from lockd._cancel import Cancellation
from lockd.client import (
    DEFAULT_SERVER,
    Cancelled,
    Client,
    Holder,
    Lease,
    LeaseSet,
    LockdError,
    LockInfo,
    LockLost,
    LockNotAcquired,
    LockSpec,
    Semaphore,
    Unavailable,
)

__version__ = "0.1.0"  # the VERSION file's; lockd_python_wheel_test checks it

__all__ = [
    "Client", "Lease", "LeaseSet", "Semaphore", "LockInfo", "LockSpec", "Holder", "LockdError",
    "LockNotAcquired", "LockLost", "Unavailable", "Cancelled", "Cancellation", "DEFAULT_SERVER",
    "tls_credentials",
]
