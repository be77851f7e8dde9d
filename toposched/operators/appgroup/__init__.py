"""AppGroup operator: placement order, running-pod count and conditions in the AppGroup status."""
