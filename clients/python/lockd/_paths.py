"""The one choice of path of an acquire, for lockd.Client and
lockd.aio.Client alike: over the Client's one Session stream, or by the
unary Acquire/AcquireAll RPCs. The same rules as every lockd client
(clients/testdata/acquire_paths.json, the C++ client's ChooseAcquirePath).
No I/O: the Clients ask, then open or use the session. Private to the
lockd package.

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
| the session's lease (granted, known     | unary   | as for a ttl given                     |
| once it opened) not session_safe        |         |                                        |
| ttl given, neither the session's lease  | unary   | one session has one lease: the ttl     |
| asked nor the one lockd granted it      |         | of the acquire that opened it          |
| otherwise                               | session | the Client's session, opened by its    |
|                                         |         | first operation                        |

A Client has one session. Its lease is the ttl (None: lockd's default) of
the first acquire that reaches the last rows; an acquire without a ttl
takes that lease. A session refused at open (``failed``: lockd answered
INVALID_ARGUMENT, e.g. for a lease out of bounds, or refused the
credentials) holds nothing: the next acquire that reaches the last rows
replaces it, and its ttl fixes the lease again.
"""

from typing import Callable, Optional, Tuple, TypeVar

S = TypeVar("S")


def wants_session(*, ttl: Optional[float], owner: Optional[str], client_owner: str,
                  auto_renew: bool, use_sessions: bool,
                  session_safe: Callable[[Optional[float]], bool]) -> bool:
    """The first four rows: False when the call goes unary whatever the
    session would say. ``session_safe``: the core's (None counts as safe)."""
    if not auto_renew or (owner and owner != client_owner):
        return False
    return session_safe(ttl) and use_sessions


def session_accepts(*, ttl: Optional[float], asked_ttl: Optional[float],
                    granted_ttl: Optional[float],
                    session_safe: Callable[[Optional[float]], bool]) -> bool:
    """The fifth and sixth rows, for the session that asked ``asked_ttl``
    and was granted ``granted_ttl`` (None until it opened)."""
    if not session_safe(granted_ttl):
        return False
    return ttl is None or ttl == asked_ttl or (granted_ttl is not None and ttl == granted_ttl)


def choose_session(session: Optional[S], new_session: Callable[[Optional[float]], S], *,
                   ttl: Optional[float], owner: Optional[str], client_owner: str,
                   auto_renew: bool, use_sessions: bool,
                   session_safe: Callable[[Optional[float]], bool]
                   ) -> Tuple[Optional[S], Optional[S]]:
    """The whole table, given the Client's ``session`` (None before its
    first). Returns (the Client's session from now on, the session to
    acquire over or None for the unary path). new_session(ttl) makes the
    session asking lease ``ttl``, when there is none or it failed; a
    session has ``ttl`` (the lease it asked), ``granted_ttl`` and
    ``failed``."""
    if not wants_session(ttl=ttl, owner=owner, client_owner=client_owner,
                         auto_renew=auto_renew, use_sessions=use_sessions,
                         session_safe=session_safe):
        return session, None
    if session is None or session.failed:
        session = new_session(ttl)
    if not session_accepts(ttl=ttl, asked_ttl=session.ttl, granted_ttl=session.granted_ttl,
                           session_safe=session_safe):
        return session, None
    return session, session
