"""The base of every contract: :class:`Registrable`, and :func:`provides` for optional parts."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ClassVar, Protocol, TypeGuard, TypeVar

Thunk = Callable[[], object]

P = TypeVar("P")


def provides(obj: object, part: Callable[..., P]) -> TypeGuard[P]:
    """Whether ``obj`` has the optional part ``part``, one of this module's runtime-checkable protocols.

    The one way the engine asks: ``if provides(timer, FlushingTimer): timer.flush()``.
    It checks the members ``part`` adds to its family's protocol (what makes
    it optional), each present and not ``None``; the family's own members
    are the registry's to check. So a registered class can be asked too,
    before it is constructed (``provides(timer_class, DeviceTimer)``).
    ``isinstance(obj, part)`` checks the whole shape instead.

    :param part: typed as a callable because a type checker takes a
        protocol for no concrete ``type[P]``.
    """
    return all(getattr(obj, name, None) is not None for name in _added_members(part))


@functools.cache
def _added_members(part: Callable[..., object]) -> tuple[str, ...]:
    """The public names a protocol declares itself, annotations included, not those of its bases."""
    own = vars(part)
    return tuple(sorted(n for n in {*own.get("__annotations__", {}), *own} if not n.startswith("_")))


class Registrable(Protocol):
    """What every registered class has, whatever its family.

    Two optional class attributes steer ``auto`` (no protocol requires
    them): ``auto_priority``, a number, and ``auto_requires_import``, the
    name of a module (``"torch"``) that ``auto`` waits for: in a program
    that has not imported it, the class is passed over without being asked
    (:meth:`kerneltune.core.plugin_system.registry.Registry.awaited_import`).
    """

    #: The name users select it by, unique within its family.
    name: ClassVar[str]

    @classmethod
    def is_available(cls) -> bool:
        """Whether it can run in this process, checked without side effects.

        A class may also have a classmethod ``unavailable_reason() -> str |
        None`` (no protocol requires it): where it is asked for by name and
        cannot run, the refusal quotes it (a missing library, no device).
        """
        ...


class AlwaysAvailable:
    """A base for a registered class that needs nothing a process may lack (a library, a device)."""

    @classmethod
    def is_available(cls) -> bool:
        """Always."""
        return True
