"""Admission webhooks: route pods to the toposched scheduler and gate AppGroup members (mutating),
reject pods and AppGroups the placement could not honour (validating)."""
