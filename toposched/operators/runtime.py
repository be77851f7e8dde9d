"""What the handlers share at run time: settings, the API client and leadership."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

from toposched.apis.constants import OPERATOR_COMPONENT
from toposched.kube import events
from toposched.kube.rest import Kube
from toposched.operators.leader import Leadership
from toposched.operators.settings import OperatorSettings


@dataclass
class Runtime:
    settings: OperatorSettings
    api: Kube
    leadership: Leadership = field(default_factory=Leadership)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def post_warning(self, body: dict[str, Any], reason: str, message: str) -> None:
        """A Warning Event about ``body``'s object, from this replica of the operator."""
        await events.post_event(self.api, body, "Warning", reason, message, OPERATOR_COMPONENT, self.settings.identity)
