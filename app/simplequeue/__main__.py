from simplequeue.cli import main

main()
