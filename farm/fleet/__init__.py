"""Where phones are: adb servers (local, and lab hosts through SSH tunnels), the farm.yaml model
that names them, identity `host/serial`, health and power cycling."""
