"""Device services: what an ADB stream carries once OPENed (shell, exec, sync, reboot, root...)."""
