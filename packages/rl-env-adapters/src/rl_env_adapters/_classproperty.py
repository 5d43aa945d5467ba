"""``classproperty``: a read-only property computed on the class (``GymEnv.available_envs``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class classproperty(Generic[T]):
    """Expose ``fget(cls)`` as an attribute of the class and of its instances.

    Examples:
        >>> class Registry:
        ...     @classproperty
        ...     def names(cls):
        ...         return [cls.__name__]
        >>> Registry.names
        ['Registry']
    """

    def __init__(self, fget: Callable[[Any], T]) -> None:  # Any: the owner class
        self.fget = fget
        self.__doc__ = fget.__doc__

    def __get__(self, instance: object, owner: type) -> T:
        return self.fget(owner)
