"""Where phones are: endpoints (adb servers), identity `host/serial`, health, leases (in the store)."""
