"""`python -m simplequeue.cli`, as the `simplequeue` script."""

from simplequeue.cli import main

main()
