"""The device side of the ADB transport protocol, served over TCP for one virtual phone.

packets: framing and constants; transport: one TCP connection, its stream table and flow control;
services/: what a stream carries (shell, exec, sync, reboot, root...); server: a phone's listener
with its online/offline/hung state. Everything Android-specific goes through PhoneWorld.
"""
