"""Serializer fields built once per serializer class, not once per request.

DRF gives every serializer instance its own fields: it deep-copies the declared ones
and, for a ``ModelSerializer``, builds one per model field again. For a job (50 fields
out, 25 in) that is about 1.5 ms of a submission's CPU, more than the database's share
of it. Most fields hold no per-request state: they turn a value into JSON and back, and
may be shared by every instance of their serializer class (also across threads: the
shared fields are only read).

A field is *not* shareable when its work reads the serializer it is bound to (its
``parent``, ``root`` or ``context``), which would be the class's one prototype instead
of the serializer at hand: hyperlinked fields (the request), defaults and validators
that need the context (``CurrentUserDefault``, ``UniqueValidator``), and method fields
of a nested serializer. :func:`shared_fields` refuses those when it builds the set, so
adding one to a serializer with :class:`FieldsBuiltOnce` fails its first use, loudly.
A top-level ``SerializerMethodField`` is fine: :meth:`FieldsBuiltOnce.to_representation`
calls its method on the serializer at hand. Partial serializers (PATCH) are refused:
whether a field is required reads ``root.partial``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

from django.utils.functional import cached_property
from rest_framework import serializers
from rest_framework.fields import SkipField
from rest_framework.relations import HyperlinkedRelatedField, PKOnlyObject
from rest_framework.utils.serializer_helpers import BindingDict

_built: dict[type, BindingDict] = {}
_building = threading.Lock()


def _nested(field: serializers.Field) -> Iterator[serializers.Field]:
    """``field``'s own fields: a list's or dict's child, a nested serializer's fields."""
    child = getattr(field, "child", None)
    if isinstance(child, serializers.Field):
        yield child
    child_relation = getattr(field, "child_relation", None)
    if isinstance(child_relation, serializers.Field):
        yield child_relation
    if isinstance(field, serializers.Serializer):
        yield from field.fields.values()


def _context_bound(field: serializers.Field, top_level: bool) -> str:
    """Why ``field`` reads the serializer it is bound to ("" when it does not)."""
    if isinstance(field, HyperlinkedRelatedField):
        return "a hyperlinked field reads the request"
    if getattr(field.default, "requires_context", False):
        return "its default reads the serializer's context"
    if any(getattr(validator, "requires_context", False) for validator in field.validators):
        return "a validator reads the serializer's context"
    if isinstance(field, serializers.SerializerMethodField) and not top_level:
        return "a nested serializer's method field runs on the shared copy"
    return ""


def shared_fields(cls: type[serializers.Serializer]) -> BindingDict:
    """The fields every instance of ``cls`` shares, built on first use (bound to one
    prototype instance). Raises ``TypeError`` naming a field that cannot be shared."""
    fields = _built.get(cls)
    if fields is not None:
        return fields
    with _building:
        if cls not in _built:
            prototype = cls(context={})
            built = BindingDict(prototype)
            for name, field in prototype.get_fields().items():
                built[name] = field
            pending = [(field, True) for field in built.values()]
            while pending:
                field, top_level = pending.pop()
                why = _context_bound(field, top_level)
                if why:
                    raise TypeError(f"{cls.__name__}.{field.field_name or field}: cannot be shared ({why}).")
                pending.extend((inner, False) for inner in _nested(field))
            _built[cls] = built
    return _built[cls]


class FieldsBuiltOnce(serializers.Serializer):
    """A serializer whose instances share one set of fields (see the module's note)."""

    @cached_property
    def fields(self) -> BindingDict:  # type: ignore[override]  # DRF's is a cached_property too
        if self.partial:
            raise TypeError(f"{type(self).__name__} shares its fields and cannot validate a partial update.")
        return shared_fields(type(self))

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """DRF's ``Serializer.to_representation``, with method fields run on ``self``
        (their shared copy is bound to the prototype, whose context is empty)."""
        ret: dict[str, Any] = {}
        for field in self._readable_fields:
            name = cast(str, field.field_name)  # bound fields have one
            if isinstance(field, serializers.SerializerMethodField):
                ret[name] = getattr(self, field.method_name)(instance)
                continue
            try:
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            check_for_none = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            ret[name] = None if check_for_none is None else field.to_representation(attribute)
        return ret
