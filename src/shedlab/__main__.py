"""``python -m shedlab`` runs the command line."""

from shedlab.cli import main

main()
