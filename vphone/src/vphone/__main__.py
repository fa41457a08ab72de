"""`python -m vphone`: the simulator's command line (vphone.cli)."""

from vphone.cli import main

main()
