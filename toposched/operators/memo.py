"""What the handlers share: Kopf's memo, with a type for each thing the start-up puts in it."""

from typing import TYPE_CHECKING

import kopf

from toposched.operators.runtime import Runtime
from toposched.operators.settings import OperatorSettings

if TYPE_CHECKING:  # the handler modules take an OperatorMemo themselves
    from toposched.operators.appgroup.handlers import AppGroupReconciler
    from toposched.operators.networktopology.handlers import NetworkTopologyReconciler


class OperatorMemo(kopf.Memo):
    """Kopf gives each object's handlers a shallow copy of the memo ``kopf.run`` was given, made
    after the start-up handler ran, so what it sets here is shared by all of them.

    ``toposched operator`` passes one that holds its settings. Under ``kopf run -m`` Kopf makes a
    plain ``kopf.Memo``, which reads and writes these attributes the same way; the start-up handler
    then sets ``settings`` from the environment.
    """

    settings: OperatorSettings
    runtime: Runtime
    appgroups: "AppGroupReconciler"
    networktopologies: "NetworkTopologyReconciler"
