"""The relation graph's build parts other than the step: entities, community detection."""
