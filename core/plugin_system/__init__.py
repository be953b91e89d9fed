"""The plugin system: hook specifications, plugin contracts, registries, the session, settings, events."""
