"""One phone: DeviceSession (shell with deadline and exit code, quoted arguments, content-cached
push, pull, detached processes by pid), pure Android parsers (android.py), and controls
(charging through a vendor node, stay awake)."""
