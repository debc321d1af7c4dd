"""Plans: the rules of a client operation that does I/O (retries, pauses,
undos) written once, as a generator that yields each piece of I/O it needs
as (action, argument) and gets its result back (or its exception thrown
in). run() carries a plan out with blocking calls, arun() with coroutines,
so that lockd.Client and lockd.aio.Client follow the same rules from the
same code (lockd._acquire, lockd._core). Private to the lockd package.

Actions: ATTEMPT (argument: the attempt's timeout in seconds; result: its
response), UNDO (argument: the arguments of the core's undo_confirmed;
result: whether the undo was confirmed), SLEEP (argument: seconds).
"""

from typing import Any, Awaitable, Callable, Generator, Tuple

ATTEMPT, UNDO, SLEEP = "attempt", "undo", "sleep"

Plan = Generator[Tuple[str, Any], Any, Any]


def _advance(plan: Plan, outcome: Tuple[Any, Any]) -> Tuple[bool, Any]:
    """Hands ``outcome`` (result, exception) to the plan: (True, its return
    value) when it ended, else (False, its next (action, argument))."""
    result, error = outcome
    try:
        return False, (plan.throw(error) if error is not None else plan.send(result))
    except StopIteration as done:
        return True, done.value


def run(plan: Plan, io: Callable[[str, Any], Any]) -> Any:
    """Runs ``plan``, io(action, argument) doing each piece of I/O; returns
    what the plan returns, raises what it raises."""
    outcome: Tuple[Any, Any] = (None, None)
    while True:
        ended, step = _advance(plan, outcome)
        if ended:
            return step
        try:
            outcome = (io(*step), None)
        except BaseException as e:  # noqa: B036 (handed to the plan, which re-raises)
            outcome = (None, e)


async def arun(plan: Plan, io: Callable[[str, Any], Awaitable[Any]]) -> Any:
    """run() with a coroutine function ``io``."""
    outcome: Tuple[Any, Any] = (None, None)
    ended, step = _advance(plan, outcome)
    while not ended:
        try:
            outcome = (await io(*step), None)
        except BaseException as e:  # noqa: B036 (handed to the plan, which re-raises)
            outcome = (None, e)
        ended, step = _advance(plan, outcome)
    return step
