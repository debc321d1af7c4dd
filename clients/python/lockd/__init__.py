"""lockd: Python client of the lockd distributed lock service.

    import lockd

    client = lockd.Client("127.0.0.1:7411")
    with client.lock("orders/42", ttl=10, wait=5) as lease:
        charge(order, fencing_token=lease.fencing_token)

See lockd.client for the guarantees: locks bound to a Session stream that
lockd renews and resumes after a reconnect (the default), or the unary path
(send-time validity, one watchdog thread per Client renewing every ttl/3);
lost detection, safe retries.
"""

from lockd._auth import tls_credentials
from lockd.client import (
    DEFAULT_SERVER,
    Client,
    Lease,
    LockdError,
    LockInfo,
    LockLost,
    LockNotAcquired,
    Unavailable,
)

__version__ = "0.1.0"  # the VERSION file's; lockd_python_wheel_test checks it

__all__ = [
    "Client", "Lease", "LockInfo", "LockdError", "LockNotAcquired", "LockLost", "Unavailable",
    "DEFAULT_SERVER", "tls_credentials",
]
