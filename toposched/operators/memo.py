"""What the handlers share: Kopf's memo, with a type for each thing the start-up puts in it."""

import kopf

from toposched.operators.appgroup.reconciler import AppGroupReconciler
from toposched.operators.networktopology.reconciler import NetworkTopologyReconciler
from toposched.operators.runtime import Runtime
from toposched.operators.settings import OperatorSettings


class OperatorMemo(kopf.Memo):
    """Kopf gives each object's handlers a shallow copy of the memo ``kopf.run`` was given, made
    after the start-up handler ran, so what it sets here is shared by all of them.

    ``toposched operator`` passes one that holds its settings. Under ``kopf run -m`` Kopf makes a
    plain ``kopf.Memo``, which reads and writes these attributes the same way; the start-up handler
    then sets ``settings`` from the environment.
    """

    settings: OperatorSettings
    runtime: Runtime
    appgroups: AppGroupReconciler
    networktopologies: NetworkTopologyReconciler
