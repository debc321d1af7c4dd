"""The one choice of path of an acquire, for lockd.Client and
lockd.aio.Client alike: over one of the Client's Session streams, or by
the unary Acquire/AcquireAll RPCs. No I/O: the Clients ask, then open or
use the session. Private to the lockd package.

The first row that holds decides:

| condition                               | path    | why                                    |
|-----------------------------------------|---------|----------------------------------------|
| auto_renew=False                        | unary   | lockd renews every session lease;      |
|                                         |         | this one must end with its ttl         |
| owner= other than the Client's          | unary   | a session acts for the Client's        |
|                                         |         | owner only                             |
| ttl given, not session_safe             | unary   | a hung lockd could outlast the         |
|                                         |         | lease unnoticed (2/3 ttl - drift <= K) |
| use_sessions=False, lockd without       | unary   | no session to use                      |
| Session (UNIMPLEMENTED seen), or closed |         |                                        |
| no ttl, and the server's default ttl    | unary   | as for a ttl given                     |
| (known once a session opened) not safe  |         |                                        |
| otherwise                               | session | the Client's session for this ttl,     |
|                                         |         | opened by its first operation (a       |
|                                         |         | new one if the last was refused)       |

A Client keeps one session per lease ttl it asks (None: the server's
default), so the rows before the last do not depend on the sessions open.
"""

from typing import Callable, Dict, Optional, TypeVar

S = TypeVar("S")


def wants_session(*, ttl: Optional[float], owner: Optional[str], client_owner: str,
                  auto_renew: bool, use_sessions: bool,
                  session_safe: Callable[[Optional[float]], bool]) -> bool:
    """The first four rows: False when the call goes unary whatever the
    session would say. ``session_safe``: the core's (None counts as safe)."""
    if not auto_renew or (owner and owner != client_owner):
        return False
    return session_safe(ttl) and use_sessions


def session_lease_ok(*, ttl: Optional[float], granted_ttl: Optional[float],
                     session_safe: Callable[[Optional[float]], bool]) -> bool:
    """The fifth row, once the session for ``ttl`` is known: a call that
    asked no ttl goes unary when the lease lockd granted that session
    (``granted_ttl``, None until it opened) is not session-safe."""
    return ttl is not None or session_safe(granted_ttl)


def choose_session(sessions: Dict[Optional[float], S], new_session: Callable[[], S], *,
                   ttl: Optional[float], owner: Optional[str], client_owner: str,
                   auto_renew: bool, use_sessions: bool,
                   session_safe: Callable[[Optional[float]], bool]) -> Optional[S]:
    """The whole table: the session of ``sessions`` (the Client's, by ttl)
    to acquire over, made by new_session() when there is none for ``ttl``
    or the last one failed; None for the unary path."""
    if not wants_session(ttl=ttl, owner=owner, client_owner=client_owner,
                         auto_renew=auto_renew, use_sessions=use_sessions,
                         session_safe=session_safe):
        return None
    session = sessions.get(ttl)
    if session is None or session.failed:
        session = sessions[ttl] = new_session()
    if not session_lease_ok(ttl=ttl, granted_ttl=session.granted_ttl,
                            session_safe=session_safe):
        return None
    return session
