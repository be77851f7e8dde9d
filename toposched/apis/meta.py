"""Shared model pieces: the camelCase base, the object envelope and status conditions."""

from datetime import datetime
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """Fields are named in snake_case and (de)serialised with their camelCase alias.

    Unknown fields are kept, not dropped: a newer upstream field written by another tool
    must survive a read-modify-write by toposched.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="allow",
    )

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        return cls.model_validate(data)

    def to_dict(self) -> dict[str, Any]:
        """The object as the apiserver would show it: aliases, only the fields that were set."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class KubeObject(CamelModel):
    """Common envelope of a Kubernetes object; metadata is kept as the server sent it.

    Subclasses pin ``api_version`` and ``kind`` with Literal types and say where the
    resource lives (group, version, plural, scope) for the clients.
    """

    GROUP: ClassVar[str]
    VERSION: ClassVar[str]
    PLURAL: ClassVar[str]
    NAMESPACED: ClassVar[bool]

    metadata: dict[str, Any] = {}

    def to_dict(self) -> dict[str, Any]:
        """The object as the apiserver would show it, always with apiVersion and kind first."""
        body = super().to_dict()
        head = {"apiVersion": getattr(self, "api_version"), "kind": getattr(self, "kind")}  # noqa: B009
        return head | {k: v for k, v in body.items() if k not in head}

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str | None:
        ns = self.metadata.get("namespace")
        return None if ns is None else str(ns)


class Condition(CamelModel):
    """A standard Kubernetes status condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None
    observed_generation: int | None = None
